// gomutate lists mutation candidates of Go source files and finds the spans that hide test functions; OpsBench's
// DevOps task generator (orchestrator/devops_projects/mutate.py) drives it. Standard library only.
//
//	gomutate list FILE...          JSON array of {file, start, end, new, kind, func} (byte offsets)
//	gomutate hide DIR NAME...      JSON array of {file, spans: [[start, end], ...]} removing the functions NAME from
//	                               DIR's _test.go files, with the imports nothing else in the file uses
package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

type candidate struct {
	File  string `json:"file"`
	Start int    `json:"start"`
	End   int    `json:"end"`
	New   string `json:"new"`
	Kind  string `json:"kind"`
	Func  string `json:"func"`
}

var opSwap = map[token.Token]token.Token{
	token.ADD: token.SUB, token.SUB: token.ADD, token.MUL: token.QUO, token.QUO: token.MUL,
	token.REM: token.QUO, token.LSS: token.LEQ, token.LEQ: token.LSS, token.GTR: token.GEQ,
	token.GEQ: token.GTR, token.EQL: token.NEQ, token.NEQ: token.EQL, token.LAND: token.LOR,
	token.LOR: token.LAND, token.SHL: token.SHR, token.SHR: token.SHL, token.AND: token.OR, token.OR: token.AND,
}

var assignSwap = map[token.Token]token.Token{token.ADD_ASSIGN: token.SUB_ASSIGN, token.SUB_ASSIGN: token.ADD_ASSIGN}

func isComparison(t token.Token) bool {
	return t == token.LSS || t == token.LEQ || t == token.GTR || t == token.GEQ || t == token.EQL || t == token.NEQ
}

func list(files []string) ([]candidate, error) {
	out := []candidate{}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, src, 0)
		if err != nil {
			return nil, err
		}
		off := func(p token.Pos) int { return fset.Position(p).Offset }
		text := func(n ast.Node) string { return string(src[off(n.Pos()):off(n.End())]) }
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) > 0 {
				name = strings.TrimLeft(text(fn.Recv.List[0].Type), "*") + "." + name
			}
			add := func(start, end int, repl, kind string) {
				out = append(out, candidate{file, start, end, repl, kind, name})
			}
			intLit := func(e ast.Expr) {
				lit, ok := e.(*ast.BasicLit)
				if !ok || lit.Kind != token.INT {
					return
				}
				v, err := strconv.Atoi(lit.Value)
				if err != nil {
					return
				}
				add(off(lit.Pos()), off(lit.End()), strconv.Itoa(v+1), "boundary")
				if v > 0 {
					add(off(lit.Pos()), off(lit.End()), strconv.Itoa(v-1), "boundary")
				}
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.FuncLit:
					return true
				case *ast.BinaryExpr:
					if repl, ok := opSwap[x.Op]; ok {
						p := off(x.OpPos)
						add(p, p+len(x.Op.String()), repl.String(), "operator")
					}
					if isComparison(x.Op) {
						intLit(x.X)
						intLit(x.Y)
					}
				case *ast.AssignStmt:
					if repl, ok := assignSwap[x.Tok]; ok {
						p := off(x.TokPos)
						add(p, p+len(x.Tok.String()), repl.String(), "operator")
					}
				case *ast.IncDecStmt:
					repl := "--"
					if x.Tok == token.DEC {
						repl = "++"
					}
					p := off(x.TokPos)
					add(p, p+2, repl, "operator")
				case *ast.UnaryExpr:
					if x.Op == token.NOT {
						add(off(x.OpPos), off(x.OpPos)+1, "", "operator")
					}
				case *ast.SliceExpr:
					if x.Low != nil {
						intLit(x.Low)
					}
					if x.High != nil {
						intLit(x.High)
					}
				case *ast.IfStmt:
					if x.Else == nil && len(x.Body.List) > 0 {
						add(off(x.Body.Lbrace)+1, off(x.Body.Rbrace), "", "branch")
					}
				case *ast.CallExpr:
					if len(x.Args) >= 2 && x.Ellipsis == token.NoPos {
						a, b := x.Args[0], x.Args[1]
						ta, tb := text(a), text(b)
						between := string(src[off(a.End()):off(b.Pos())])
						if ta != tb && !strings.Contains(ta+between+tb, "\n") {
							add(off(a.Pos()), off(b.End()), tb+between+ta, "arguments")
						}
					}
				}
				return true
			})
		}
	}
	return out, nil
}

type hidden struct {
	File  string   `json:"file"`
	Spans [][2]int `json:"spans"`
}

// lineStart moves p back over the indentation to the start of its line; lineEnd moves p past the newline.
func lineStart(src []byte, p int) int {
	for p > 0 && (src[p-1] == ' ' || src[p-1] == '\t') {
		p--
	}
	return p
}

func lineEnd(src []byte, p int) int {
	for p < len(src) && (src[p] == ' ' || src[p] == '\t' || src[p] == '\r') {
		p++
	}
	if p < len(src) && src[p] == '\n' {
		p++
	}
	return p
}

func importName(spec *ast.ImportSpec) string {
	if spec.Name != nil {
		return spec.Name.Name
	}
	path, _ := strconv.Unquote(spec.Path.Value)
	parts := strings.Split(path, "/")
	last := parts[len(parts)-1]
	if len(parts) > 1 && len(last) > 1 && last[0] == 'v' && strings.Trim(last[1:], "0123456789") == "" {
		last = parts[len(parts)-2]
	}
	return last
}

func hide(dir string, names []string) ([]hidden, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	out := []hidden{}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		off := func(p token.Pos) int { return fset.Position(p).Offset }
		var spans [][2]int
		removed := map[ast.Node]bool{}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !want[fn.Name.Name] {
				continue
			}
			start := fn.Pos()
			if fn.Doc != nil {
				start = fn.Doc.Pos()
			}
			spans = append(spans, [2]int{lineStart(src, off(start)), lineEnd(src, off(fn.End()))})
			removed[fn] = true
		}
		if len(spans) == 0 {
			continue
		}
		// Package names still used by what stays.
		used := map[string]bool{}
		for _, decl := range f.Decls {
			if removed[decl] {
				continue
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok {
						used[id.Name] = true
					}
				}
				return true
			})
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.IMPORT {
				continue
			}
			var drop []*ast.ImportSpec
			for _, s := range gen.Specs {
				spec := s.(*ast.ImportSpec)
				name := importName(spec)
				if name == "_" || name == "." || used[name] {
					continue
				}
				drop = append(drop, spec)
			}
			if len(drop) == 0 {
				continue
			}
			if len(drop) == len(gen.Specs) {
				spans = append(spans, [2]int{lineStart(src, off(gen.Pos())), lineEnd(src, off(gen.End()))})
				continue
			}
			for _, spec := range drop {
				spans = append(spans, [2]int{lineStart(src, off(spec.Pos())), lineEnd(src, off(spec.End()))})
			}
		}
		out = append(out, hidden{file, spans})
	}
	return out, nil
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: gomutate list FILE... | gomutate hide DIR NAME...")
		os.Exit(2)
	}
	var result interface{}
	var err error
	switch os.Args[1] {
	case "list":
		result, err = list(os.Args[2:])
	case "hide":
		result, err = hide(os.Args[2], os.Args[3:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(result); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
