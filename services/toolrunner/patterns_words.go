package toolrunner

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// shellWord is one word of a parsed command as the classifier sees it: the
// text it has when nothing in it expands, and what in it would expand.
type shellWord struct {
	raw     string // the word with quoting removed, in its own case; "$name" for an expansion
	text    string // raw lowercased: what the rules match
	literal bool   // no expansion of any kind: the shell passes raw as it is
	glob    bool   // an unquoted *, ? or [ the shell may expand to file names
	brace   bool   // an unquoted {a,b} or {1..3} the shell expands to several words
	subst   bool   // a command or process substitution: output of a command becomes the word
	code    bool   // quoted text holding shell code ($(, `): inert unless evaluated
}

// word reads w, classifying any command or process substitution in it.
func (v *walker) word(w *syntax.Word) shellWord {
	out := shellWord{literal: true}
	var b strings.Builder
	for i, p := range w.Parts {
		v.part(p, i == 0, false, &b, &out)
	}
	out.raw = b.String()
	out.text = strings.ToLower(out.raw)
	return out
}

func (v *walker) part(p syntax.WordPart, first, quoted bool, b *strings.Builder, out *shellWord) {
	switch p := p.(type) {
	case *syntax.Lit:
		v.lit(p.Value, first, quoted, b, out)
	case *syntax.SglQuoted:
		if p.Dollar { // $'\x72m': ANSI-C escapes the classifier does not decode
			out.literal = false
			b.WriteString("$'" + p.Value + "'")
			return
		}
		out.code = out.code || holdsCode(p.Value)
		b.WriteString(p.Value)
	case *syntax.DblQuoted:
		for _, q := range p.Parts {
			v.part(q, false, true, b, out)
		}
	case *syntax.ParamExp:
		out.literal = false
		v.param(p, b)
	case *syntax.CmdSubst:
		out.literal, out.subst = false, true
		v.nested(p.Stmts)
		b.WriteString("$(…)")
	case *syntax.ProcSubst:
		out.literal, out.subst = false, true
		if p.Op == syntax.CmdOut { // >(sh) reads what the command writes into it
			v.stmts(p.Stmts, input{kind: inputPipe})
		} else {
			v.nested(p.Stmts)
		}
		b.WriteString("<(…)")
	case *syntax.ArithmExp:
		out.literal = false
		v.arith = true
		v.walkNode(p.X)
		b.WriteString("$((…))")
	default: // extended globs, brace expansions
		out.literal, out.glob = false, true
		b.WriteString("*")
	}
}

// lit unescapes an unquoted or double-quoted literal and notes what the
// shell would expand in it.
func (v *walker) lit(s string, first, quoted bool, b *strings.Builder, out *shellWord) {
	if quoted {
		out.code = out.code || holdsCode(s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			if quoted && !strings.ContainsRune("$`\"\\\n", rune(s[i])) {
				b.WriteByte('\\')
			}
			if s[i] != '\n' {
				b.WriteByte(s[i])
			}
			continue
		case quoted:
		case c == '*' || c == '?' || (c == '[' && strings.Contains(s[i+1:], "]")):
			out.glob = true
		case c == '{' && strings.ContainsAny(s[i:], ",.") && strings.Contains(s[i:], "}"):
			out.brace = true
		}
		b.WriteByte(c)
	}
}

// param writes a parameter expansion as "$name" and classifies what its
// operators may run ( ${x:-$(cmd)} ).
func (v *walker) param(p *syntax.ParamExp, b *strings.Builder) {
	name := "?"
	if p.Param != nil {
		name = p.Param.Value
	}
	if p.Excl || p.Index != nil {
		v.evalContext = true // ${!x} and ${a[i]} evaluate a name or a subscript
	}
	b.WriteString("$" + name)
	v.walkNode(p)
}

// holdsCode reports text that would run a command if a shell evaluated it
// (an arithmetic subscript, eval, a second parse).
func holdsCode(s string) bool {
	return strings.Contains(s, "$(") || strings.Contains(s, "`") || strings.Contains(s, "<(") || strings.Contains(s, ">(")
}

// walkNode classifies the substitutions anywhere under n (in arithmetic,
// parameter operators, test expressions).
func (v *walker) walkNode(n syntax.Node) {
	if n == nil {
		return
	}
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst:
			v.nested(n.Stmts)
			return false
		case *syntax.ProcSubst:
			v.nested(n.Stmts)
			return false
		case *syntax.ArithmExp, *syntax.ParamExp:
			if p, ok := n.(*syntax.ParamExp); ok && (p.Excl || p.Index != nil) {
				v.evalContext = true
			}
		case *syntax.SglQuoted:
			v.codeText = v.codeText || holdsCode(n.Value)
		case *syntax.Lit:
			v.codeText = v.codeText || holdsCode(n.Value)
		}
		return true
	})
}

// words reads every word of a command.
func (v *walker) words(ws []*syntax.Word) []shellWord {
	out := make([]shellWord, len(ws))
	for i, w := range ws {
		out[i] = v.word(w)
		v.codeText = v.codeText || out[i].code
	}
	return out
}

func texts(ws []shellWord) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.text
	}
	return out
}

// opaque reports whether any word's value is decided only when the line
// runs (an expansion, a substitution, a glob or a brace expansion).
func opaque(ws []shellWord) (shellWord, bool) {
	for _, w := range ws {
		if !w.literal || w.brace {
			return w, true
		}
	}
	return shellWord{}, false
}
