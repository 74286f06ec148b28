package http

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHeaderNamesCanonical: every header name this package looks up or
// sets without conversion (header, setHeader, headerValue, Header["..."])
// is spelled as net/http stores it; a name spelled otherwise would never
// be found.
func TestHeaderNamesCanonical(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		check := func(e ast.Expr) {
			lit, ok := e.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return
			}
			v, _ := strconv.Unquote(lit.Value)
			seen++
			if c := textproto.CanonicalMIMEHeaderKey(v); c != v {
				t.Errorf("%s: header name %q is not spelled as net/http stores it (%q)", fset.Position(lit.Pos()), v, c)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && len(n.Args) >= 2 {
					switch id.Name {
					case "header", "setHeader", "headerValue":
						check(n.Args[1])
					}
				}
			case *ast.IndexExpr:
				if sel, ok := n.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Header" {
					check(n.Index)
				}
			}
			return true
		})
	}
	if seen < 10 {
		t.Errorf("found %d header names; the search no longer sees the calls", seen)
	}
}
