package toolrunner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// maxLineChars cuts single lines (minified files) so one line cannot fill a result.
const maxLineChars = 2000

type readArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

func (s *Service) readFile(_ context.Context, c *call) outcome {
	var a readArgs
	if err := decodeArgs(c.spec.Name, c.spec.Parameters, c.req.GetArguments(), &a); err != nil {
		return failed(err)
	}
	path, err := c.ws.resolve(a.Path)
	if err != nil {
		return failed(err)
	}
	f, err := openRegular(path, a.Path)
	if err != nil {
		return failed(err)
	}
	defer f.Close()
	if binary, err := looksBinary(f); err != nil || binary {
		return failed(fmt.Errorf("%s looks like a binary file; read_file shows text only", a.Path))
	}
	first := max(a.Offset, 1)
	limit := a.Limit
	if limit <= 0 || limit > s.cfg.ReadFileMaxLines {
		limit = s.cfg.ReadFileMaxLines
	}
	text, last, total, err := numberedLines(f, first, limit, s.cfg.MaxResultChars)
	if err != nil {
		return failed(fmt.Errorf("read %s: %w", a.Path, err))
	}
	return ok(text + readFooter(a.Path, first, last, total))
}

func openRegular(path, shown string) (*os.File, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s does not exist", shown)
	}
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return nil, fmt.Errorf("%s is a directory; use search_files or terminal to list it", shown)
	}
	if !info.Mode().IsRegular() {
		// a FIFO or a device would block the read, or never end
		return nil, fmt.Errorf("%s is not a regular file (%s); read_file reads files only", shown, info.Mode().Type())
	}
	return os.Open(path)
}

func looksBinary(f *os.File) (bool, error) {
	head := make([]byte, 8000)
	n, err := f.Read(head)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	return bytes.IndexByte(head[:n], 0) >= 0, nil
}

// numberedLines returns lines [first, first+limit) as "N|text", stopping early
// at maxChars, with the number of the last line shown and the file's total.
func numberedLines(r io.Reader, first, limit, maxChars int) (string, int, int, error) {
	br := bufio.NewReader(r)
	var b strings.Builder
	n, last := 0, 0
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			n++
			if n >= first && n < first+limit && b.Len() < maxChars {
				fmt.Fprintf(&b, "%6d|%s\n", n, cutLine(strings.TrimRight(line, "\r\n")))
				last = n
			}
		}
		if errors.Is(err, io.EOF) {
			return b.String(), last, n, nil
		}
		if err != nil {
			return "", 0, 0, err
		}
	}
}

func cutLine(s string) string {
	if utf8.RuneCountInString(s) <= maxLineChars {
		return s
	}
	return string([]rune(s)[:maxLineChars]) + " [line truncated]"
}

func readFooter(path string, first, last, total int) string {
	switch {
	case total == 0:
		return fmt.Sprintf("(%s is empty)", path)
	case first > total:
		return fmt.Sprintf("(%s has %d lines; offset %d is past the end)", path, total, first)
	case last < total:
		return fmt.Sprintf("(showing lines %d-%d of %d; read on with offset=%d)", first, last, total, last+1)
	}
	return ""
}

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func (s *Service) writeFile(_ context.Context, c *call) outcome {
	var a writeArgs
	if err := decodeArgs(c.spec.Name, c.spec.Parameters, c.req.GetArguments(), &a); err != nil {
		return failed(err)
	}
	path, err := c.ws.resolve(a.Path)
	if err != nil {
		return failed(err)
	}
	if err := writeText(path, a.Content); err != nil {
		return failed(fmt.Errorf("write %s: %w", a.Path, err))
	}
	lines := strings.Count(a.Content, "\n")
	if a.Content != "" && !strings.HasSuffix(a.Content, "\n") {
		lines++
	}
	return ok(fmt.Sprintf("wrote %d bytes (%d lines) to %s", len(a.Content), lines, c.ws.rel(path)))
}

// writeText replaces path's content, keeping its mode when it exists.
func writeText(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if info, err := os.Stat(path); err == nil {
		if info.IsDir() {
			return errors.New("it is a directory")
		}
		mode = info.Mode().Perm()
	}
	return os.WriteFile(path, []byte(content), mode)
}

type patchArgs struct {
	Path       string `json:"path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all"`
}

// patchLoose applies a patch whose old_string is not in the file as is but
// matches one of findLoose's looser ways.
func (s *Service) patchLoose(c *call, path, text string, a patchArgs) outcome {
	m, found := findLoose(text, a.OldString, a.NewString)
	switch {
	case !found:
		return failed(fmt.Errorf("old_string was not found in %s; read the file and copy the exact text, including whitespace and indentation", a.Path))
	case len(m.ranges) > 1 && !a.ReplaceAll:
		return failed(fmt.Errorf("old_string occurs %d times in %s (%s); include more surrounding lines to make it unique, or set replace_all to true", len(m.ranges), a.Path, m.how))
	}
	if err := writeText(path, m.apply(text)); err != nil {
		return failed(fmt.Errorf("write %s: %w", a.Path, err))
	}
	return ok(fmt.Sprintf("replaced %d occurrence(s) in %s (matched %s)", len(m.ranges), c.ws.rel(path), m.how))
}

func (s *Service) patch(_ context.Context, c *call) outcome {
	var a patchArgs
	if err := decodeArgs(c.spec.Name, c.spec.Parameters, c.req.GetArguments(), &a); err != nil {
		return failed(err)
	}
	if a.OldString == "" {
		return failed(argError(c.spec.Name, c.spec.Parameters, `field "old_string" must not be empty (use write_file to create a file)`))
	}
	if a.OldString == a.NewString {
		return failed(errors.New("old_string and new_string are identical; nothing to change"))
	}
	path, err := c.ws.resolve(a.Path)
	if err != nil {
		return failed(err)
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return failed(fmt.Errorf("%s does not exist; use write_file to create it", a.Path))
	}
	if err != nil {
		return failed(fmt.Errorf("read %s: %w", a.Path, err))
	}
	text := string(data)
	switch n := strings.Count(text, a.OldString); {
	case n == 0:
		return s.patchLoose(c, path, text, a)
	case n > 1 && !a.ReplaceAll:
		return failed(fmt.Errorf("old_string occurs %d times in %s; include more surrounding lines to make it unique, or set replace_all to true", n, a.Path))
	default:
		text = strings.ReplaceAll(text, a.OldString, a.NewString)
		if err := writeText(path, text); err != nil {
			return failed(fmt.Errorf("write %s: %w", a.Path, err))
		}
		return ok(fmt.Sprintf("replaced %d occurrence(s) in %s", n, c.ws.rel(path)))
	}
}
