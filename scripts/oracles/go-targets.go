// Lists the targets of a Go file as posrecall defines them (docs/METHOD.md
// section 2, Go) with Go's own go/parser, independent of posrecall's
// tree-sitter grammar: function and method declarations with a body (not
// function literals), a method qualified by its receiver's type without
// `*` or type arguments (`Point.String`); each named by its bare name when
// no other function in the file has it, else by its qualified name when
// that is unique. Eligible when at least LINES lines lie strictly between
// the line holding the body's `{` and the line holding its `}`. Lines end
// at "\n" only, without a "\r" before it, as posrecall counts them.
//
// Prints one JSON object per target: {"name", "line", "expected"} (line:
// 1-based line of `func`; expected: the LINES lines after the `{` line).
//
//	scripts/oracles/go-targets FILE [LINES]     (runs this file with `go run`)
package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strconv"
	"strings"
)

type fn struct {
	name, qualified string
	line, open, close int // 1-based
}

// receiver is the type a method is declared on, without `*` or type arguments.
func receiver(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return receiver(t.X)
	case *ast.ParenExpr:
		return receiver(t.X)
	case *ast.IndexExpr:
		return receiver(t.X)
	case *ast.IndexListExpr:
		return receiver(t.X)
	case *ast.Ident:
		return t.Name
	}
	return ""
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: scripts/oracles/go-targets FILE [LINES]")
		os.Exit(2)
	}
	want := 20
	if len(os.Args) > 2 {
		n, err := strconv.Atoi(os.Args[2])
		if err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "go-targets: LINES must be a positive number")
			os.Exit(2)
		}
		want = n
	}
	src, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-targets:", err)
		os.Exit(1)
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, os.Args[1], src, parser.SkipObjectResolution)
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-targets: does not parse:", err)
		os.Exit(1)
	}
	var fns []fn
	for _, d := range file.Decls {
		f, ok := d.(*ast.FuncDecl)
		if !ok || f.Body == nil {
			continue
		}
		q := f.Name.Name
		if f.Recv != nil && len(f.Recv.List) > 0 {
			q = receiver(f.Recv.List[0].Type) + "." + q
		}
		fns = append(fns, fn{f.Name.Name, q, fset.Position(f.Type.Func).Line,
			fset.Position(f.Body.Lbrace).Line, fset.Position(f.Body.Rbrace).Line})
	}
	count := func(key func(fn) string, v string) int {
		n := 0
		for _, f := range fns {
			if key(f) == v {
				n++
			}
		}
		return n
	}
	lines := strings.Split(string(src), "\n")
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\r")
	}
	sort.SliceStable(fns, func(i, j int) bool { return fns[i].line < fns[j].line })
	out := json.NewEncoder(os.Stdout)
	out.SetEscapeHTML(false)
	for _, f := range fns {
		name := ""
		if count(func(f fn) string { return f.name }, f.name) == 1 {
			name = f.name
		} else if f.qualified != f.name && count(func(f fn) string { return f.qualified }, f.qualified) == 1 {
			name = f.qualified
		}
		if name == "" || f.close-f.open-1 < want {
			continue
		}
		// The lines after the `{` line: 0-based indices open .. open+want.
		out.Encode(map[string]any{"name": name, "line": f.line, "expected": lines[f.open : f.open+want]})
	}
}
