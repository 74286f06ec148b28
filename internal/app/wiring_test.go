package app

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const configPath = "github.com/countbot/toolsvc/internal/config"

// TestBuildersReadSections keeps every builder on its own configuration
// section: a read of the configuration in this package's code names the
// section (cfg.Exec.ExecTimeout, or a config.Exec handed to the builder),
// never a field the sections lend to the whole (cfg.ExecTimeout), so that
// what each part of the service depends on shows in its signature.
func TestBuildersReadSections(t *testing.T) {
	reads := promotedReads(t)
	for _, r := range reads {
		t.Errorf("%s reads %s through the whole configuration; name its section", r.pos, r.name)
	}
	t.Logf("%d reads of promoted configuration fields and methods", len(reads))
}

// promotedRead is one selector on a config.Config value that reaches a
// section's field or method through the embedding.
type promotedRead struct{ pos, name string }

// promotedReads type-checks the package's non-test files with the real
// config package and placeholders for every other import (their types
// are not needed to know a config.Config value), and returns each
// selector whose receiver is a config.Config and whose selection passes
// through an embedded section.
func promotedReads(t *testing.T) []promotedRead {
	t.Helper()
	fset, files := parseOwnFiles(t)
	src := importer.ForCompiler(fset, "source", nil)
	conf := types.Config{
		Importer: importerFunc(func(p string) (*types.Package, error) {
			if p == configPath {
				return src.Import(p)
			}
			pkg := types.NewPackage(p, placeholderName(p))
			pkg.MarkComplete()
			return pkg, nil
		}),
		Error: func(error) {}, // the placeholders leave much undefined
	}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
	_, _ = conf.Check("app", fset, files, info)
	var out []promotedRead
	for sel, s := range info.Selections {
		if len(s.Index()) < 2 || !isConfig(s.Recv()) {
			continue
		}
		out = append(out, promotedRead{pos: fset.Position(sel.Pos()).String(), name: sel.Sel.Name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pos < out[j].pos })
	return out
}

// parseOwnFiles parses the package's non-test files.
func parseOwnFiles(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

// TestWiresOnly keeps this package to wiring: machinery with a lifecycle
// of its own (servers to restart, a file to reload, rounds of retention)
// lives in its own package, which this one builds and closes. So no code
// here starts a goroutine (a go statement, WaitGroup.Go) or holds a
// mutex.
func TestWiresOnly(t *testing.T) {
	fset, files := parseOwnFiles(t)
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: a go statement; start the goroutine in the package whose work it is", fset.Position(n.Pos()))
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Go" {
					t.Errorf("%s: %s.Go starts a goroutine; start it in the package whose work it is", fset.Position(n.Pos()), types.ExprString(sel.X))
				}
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "sync" && (n.Sel.Name == "Mutex" || n.Sel.Name == "RWMutex") {
					t.Errorf("%s: sync.%s; the state it guards belongs in the package whose work it is", fset.Position(n.Pos()), n.Sel.Name)
				}
			}
			return true
		})
	}
}

// isConfig reports whether t is config.Config or a pointer to it.
func isConfig(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == configPath && n.Obj().Name() == "Config"
}

// placeholderName guesses an import's package name from its path
// (.../yaml/v3 is yaml); a wrong guess only leaves more undefined.
func placeholderName(p string) string {
	base := path.Base(p)
	if len(base) > 1 && base[0] == 'v' && strings.Trim(base[1:], "0123456789") == "" {
		base = path.Base(path.Dir(p))
	}
	return strings.TrimPrefix(base, "go-")
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }
