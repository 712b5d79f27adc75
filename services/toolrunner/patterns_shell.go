package toolrunner

import (
	"fmt"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// The classifier reads a command the way bash will: it parses the line with
// mvdan.cc/sh and judges every simple command in the tree, including those
// inside substitutions, functions, here-documents and `sh -c` code. What it
// cannot see the value of (a program named by a variable or a substitution,
// code piped into a shell or an interpreter, eval, a line that does not
// parse) it does not guess about: it counts as dangerous. See docs/APPROVALS.md.

// maxNesting bounds how deep `sh -c 'sh -c …'` and eval are followed.
const maxNesting = 8

// maxSteps bounds the work one command line may cost the classifier.
const maxSteps = 4000

var parsers = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }}

// inputKind is where a command's standard input comes from: what decides
// whether a shell or an interpreter started without a script runs code
// the classifier can read.
type inputKind int

const (
	inputNone   inputKind = iota // the runner's (empty) input
	inputFile                    // < a file named literally
	inputPipe                    // the output of another command
	inputText                    // a here-document or here-string
	inputOpaque                  // < a file named by an expansion
)

type input struct {
	kind    inputKind
	text    string // the here-document's text
	literal bool   // the here-document has nothing to expand
}

// walker judges one parsed command line; the strictest verdict wins.
type walker struct {
	depth int
	steps *int
	worst classification

	// What the whole line does, judged together once it is read: text that
	// holds code, a place that evaluates text (arithmetic, subscripts), and
	// values only known when the line runs.
	arith, evalContext, codeText, runtimeValue bool
}

func (v *walker) flag(vd verdict, reason string) {
	if vd > v.worst.verdict {
		v.worst = classification{vd, reason}
	}
}

func (v *walker) consider(c classification) { v.flag(c.verdict, c.reason) }

// classifyParsed judges command as bash parses it. ok is false when it
// does not parse.
func classifyParsed(command string, depth int) (c classification, ok bool) {
	defer func() {
		// A bug here must not let a command through, nor stop the runner.
		if r := recover(); r != nil {
			c, ok = classification{needsApproval, fmt.Sprintf("could not be judged (classifier error: %v)", r)}, false
		}
	}()
	p := parsers.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(command), "")
	parsers.Put(p)
	if err != nil {
		return classification{needsApproval, "could not be read as a shell command (" + err.Error() + "), so what it runs is unknown"}, false
	}
	steps := 0
	v := &walker{depth: depth, steps: &steps}
	v.stmts(f.Stmts, input{})
	v.lineRules()
	return v.worst, steps <= maxSteps
}

// lineRules flag text that the line may evaluate as code: bash runs the
// $(…) inside a[$(…)] when it evaluates a subscript or arithmetic, so a
// quoted string of code, or a value read at run time, reaching arithmetic
// is code the classifier cannot see.
func (v *walker) lineRules() {
	switch {
	case v.codeText && (v.evalContext || v.arith):
		v.flag(needsApproval, "holds shell code in a string that the line may evaluate (a[$(…)] in arithmetic or a subscript)")
	case v.runtimeValue && v.arith:
		v.flag(needsApproval, "evaluates a value read at run time as arithmetic, which can run code (a[$(…)])")
	}
}

// nest judges code that another command runs (sh -c, eval, a here-document
// into a shell) as a command line of its own.
func (v *walker) nest(code string) {
	if v.depth >= maxNesting {
		v.flag(needsApproval, "nests shell code too deeply to judge")
		v.consider(classifyWords(code))
		return
	}
	v.consider(classifyLine(code, v.depth+1))
}

func (v *walker) nested(ss []*syntax.Stmt) { v.stmts(ss, input{}) }

func (v *walker) stmts(ss []*syntax.Stmt, in input) {
	for _, s := range ss {
		v.stmt(s, in)
	}
}

func (v *walker) stmt(s *syntax.Stmt, in input) {
	in = v.redirects(s.Redirs, in)
	v.command(s.Cmd, in)
}

func (v *walker) budget() bool {
	*v.steps++
	if *v.steps > maxSteps {
		v.flag(needsApproval, "is too large to judge")
		return false
	}
	return true
}

func (v *walker) command(c syntax.Command, in input) {
	if !v.budget() {
		return
	}
	switch c := c.(type) {
	case nil:
	case *syntax.CallExpr:
		v.call(c, in)
	case *syntax.BinaryCmd:
		v.stmt(c.X, in)
		if c.Op == syntax.Pipe || c.Op == syntax.PipeAll {
			in = input{kind: inputPipe}
		}
		v.stmt(c.Y, in)
	case *syntax.Block:
		v.stmts(c.Stmts, in)
	case *syntax.Subshell:
		v.stmts(c.Stmts, in)
	case *syntax.IfClause:
		for cl := c; cl != nil; cl = cl.Else {
			v.stmts(cl.Cond, in)
			v.stmts(cl.Then, in)
		}
	case *syntax.WhileClause:
		v.stmts(c.Cond, in)
		v.stmts(c.Do, in)
	case *syntax.ForClause:
		v.loop(c.Loop)
		v.stmts(c.Do, in)
	case *syntax.CaseClause:
		v.word(c.Word)
		for _, item := range c.Items {
			v.words(item.Patterns)
			v.stmts(item.Stmts, in)
		}
	case *syntax.FuncDecl:
		v.flag(needsApproval, "defines a shell function (a name that can stand for any command)")
		v.stmt(c.Body, in)
	case *syntax.ArithmCmd:
		v.arith = true
		v.walkNode(c.X)
	case *syntax.LetClause:
		v.arith = true
		for _, e := range c.Exprs {
			v.walkNode(e)
		}
	case *syntax.TestClause:
		v.arith, v.evalContext = true, true
		v.walkNode(c.X)
	case *syntax.DeclClause:
		v.evalContext = true
		for _, a := range c.Args {
			v.assign(a)
		}
	case *syntax.TimeClause:
		if c.Stmt != nil {
			v.stmt(c.Stmt, in)
		}
	case *syntax.CoprocClause:
		v.stmt(c.Stmt, input{})
	default:
		v.flag(needsApproval, fmt.Sprintf("uses shell syntax the classifier does not judge (%T)", c))
	}
}

func (v *walker) loop(l syntax.Loop) {
	switch l := l.(type) {
	case *syntax.WordIter:
		if _, ok := opaque(v.words(l.Items)); ok {
			v.runtimeValue = true
		}
	case *syntax.CStyleLoop:
		v.arith = true
		v.walkNode(l)
	}
}

func (v *walker) call(c *syntax.CallExpr, in input) {
	for _, a := range c.Assigns {
		v.assign(a)
	}
	if len(c.Args) > 0 {
		v.run(v.words(c.Args), in, false)
	}
}

func (v *walker) assign(a *syntax.Assign) {
	if a.Index != nil {
		v.evalContext = true
		v.walkNode(a.Index)
	}
	if a.Array != nil {
		for _, e := range a.Array.Elems {
			v.walkNode(e.Index)
			if e.Value != nil {
				v.word(e.Value)
			}
		}
	}
	if a.Value == nil {
		return
	}
	w := v.word(a.Value)
	v.codeText = v.codeText || w.code
	if !w.literal {
		v.runtimeValue = true
	}
	switch {
	case a.Name != nil:
		v.consider(classifyVariable(a.Name.Value, w))
	case !w.literal: // declare "$x": the name and value come from the expansion
		v.flag(needsApproval, "declares a variable whose name is decided only when it runs ("+w.raw+")")
	default:
		if name, value, ok := strings.Cut(w.raw, "="); ok {
			v.consider(classifyVariable(name, shellWord{raw: value, text: strings.ToLower(value), literal: true}))
		}
	}
}

// redirects judges where a statement writes and returns where it reads.
func (v *walker) redirects(rs []*syntax.Redirect, in input) input {
	for _, r := range rs {
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			in = input{kind: inputText, literal: true}
			if r.Hdoc != nil {
				w := v.word(r.Hdoc)
				in.text, in.literal = w.raw, w.literal
			}
		case syntax.WordHdoc:
			w := v.word(r.Word)
			in = input{kind: inputText, text: w.raw, literal: w.literal}
		case syntax.RdrIn:
			in = input{kind: inputFile}
			if w := v.word(r.Word); !w.literal || w.glob {
				in.kind = inputOpaque
			}
		case syntax.DplIn:
			v.word(r.Word)
		case syntax.DplOut: // >&2 duplicates a descriptor; >&name writes a file
			if w := v.word(r.Word); !isDescriptor(w.raw) {
				v.target(w)
			}
		default:
			v.target(v.word(r.Word))
		}
	}
	return in
}

func isDescriptor(s string) bool {
	s = strings.TrimSuffix(s, "-")
	if s == "" {
		return true
	}
	return strings.Trim(s, "0123456789") == ""
}

// target judges a file a redirection writes.
func (v *walker) target(w shellWord) {
	if !w.literal || w.glob || w.brace {
		v.flag(needsApproval, "writes to a file whose name is decided only when it runs ("+w.raw+")")
		return
	}
	v.consider(classifyTarget(w.text))
}
