// Command funclen enforces the project's limit on function length: it
// lists the functions and methods of the non-test Go files under the given
// folders that are longer than -over lines (80 by default), counting from
// the func line to the closing brace, longest first, and exits with status
// 1 when there is any. -skip leaves out a folder (code copied from another
// project, kept as it was written). scripts/test.sh runs it on internal and
// cmd.
//
//	go run ./scripts/funclen internal cmd
//	go run ./scripts/funclen -skip internal/extract/trafilatura internal cmd
//	go run ./scripts/funclen -over 60 internal/tools
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// long is one function over the limit.
type long struct {
	pos   string // file:line of its func keyword
	name  string // Name, or (Recv).Name for a method
	lines int
}

func main() {
	over := flag.Int("over", 80, "report functions longer than this many lines")
	var skip []string
	flag.Func("skip", "leave out this folder (repeatable)", func(dir string) error {
		skip = append(skip, filepath.Clean(dir))
		return nil
	})
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: funclen [-over N] [-skip folder]... folder...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	var found []long
	for _, root := range flag.Args() {
		hits, err := walk(root, *over, skip)
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(2)
		}
		found = append(found, hits...)
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].lines > found[j].lines })
	for _, h := range found {
		fmt.Printf("%d %s %s\n", h.lines, h.name, h.pos)
	}
	if len(found) > 0 {
		os.Exit(1)
	}
}

// walk returns the functions longer than over lines in the non-test Go
// files under root, outside the folders of skip. A file that does not parse
// is an error: the limit cannot be checked on it.
func walk(root string, over int, skip []string) ([]long, error) {
	var hits []long
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && slices.Contains(skip, filepath.Clean(p)) {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			if n := end.Line - start.Line + 1; n > over {
				hits = append(hits, long{fmt.Sprintf("%s:%d", p, start.Line), funcName(fd), n})
			}
		}
		return nil
	})
	return hits, err
}

// funcName names a function as gocyclo does: Name, or (Recv).Name.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	return fmt.Sprintf("(%s).%s", typeName(fd.Recv.List[0].Type), fd.Name.Name)
}

// typeName is the name of a receiver's type: T, *T, or T of T[P].
func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "*" + typeName(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	case *ast.ParenExpr:
		return typeName(t.X)
	}
	return "?"
}
