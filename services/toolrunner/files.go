package toolrunner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

type readArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

func (s *Service) readFile(ctx context.Context, c *call) outcome {
	var a readArgs
	if err := decodeArgs(c.spec.Name, c.spec.Parameters, c.req.GetArguments(), &a); err != nil {
		return failed(err)
	}
	e, err := c.ws.resolve(a.Path, false)
	if err != nil {
		return failed(err)
	}
	defer e.close()
	f, err := openRegular(e, a.Path)
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
	shown, err := numberedLines(ctx, f, window{first: first, limit: limit, maxChars: s.cfg.MaxResultChars})
	if err != nil {
		return failed(fmt.Errorf("read %s: %w", a.Path, err))
	}
	return ok(shown.text + readFooter(a.Path, first, shown, e.info.Size()))
}

// openRegular opens the file at e, which must be a regular file.
func openRegular(e *entry, shown string) (*os.File, error) {
	if err := checkRegular(e, shown); err != nil {
		return nil, err
	}
	return e.openFile()
}

func checkRegular(e *entry, shown string) error {
	switch {
	case !e.exists():
		return fmt.Errorf("%s does not exist", shown)
	case e.info.IsDir():
		return fmt.Errorf("%s is a directory; use search_files or terminal to list it", shown)
	case !e.info.Mode().IsRegular():
		// a FIFO or a device would block the read, or never end
		return fmt.Errorf("%s is not a regular file (%s); read_file reads files only", shown, e.info.Mode().Type())
	}
	return nil
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

func readFooter(path string, first int, shown shownLines, size int64) string {
	if !shown.whole {
		return partialFooter(path, first, shown, size)
	}
	switch {
	case shown.total == 0:
		return fmt.Sprintf("(%s is empty)", path)
	case first > shown.total:
		return fmt.Sprintf("(%s has %d lines; offset %d is past the end)", path, shown.total, first)
	case shown.last < shown.total:
		return fmt.Sprintf("(showing lines %d-%d of %d; read on with offset=%d)", first, shown.last, shown.total, shown.last+1)
	}
	return ""
}

// partialFooter is the footer of a file longer than read_file reads
// through: its lines past readScanMaxBytes are neither shown nor counted.
func partialFooter(path string, first int, shown shownLines, size int64) string {
	scanned := fmt.Sprintf("%s is %s; read_file reads only its first %s (%d lines)", path, sizeText(size), sizeText(readScanMaxBytes), shown.total)
	switch {
	case first > shown.total:
		return fmt.Sprintf("(%s, and offset %d is past them; use terminal (tail, sed -n) for the rest)", scanned, first)
	case shown.last < shown.total:
		return fmt.Sprintf("(showing lines %d-%d; %s; read on with offset=%d)", first, shown.last, scanned, shown.last+1)
	}
	return fmt.Sprintf("(showing lines %d-%d; %s; use terminal (tail, sed -n) for the rest)", first, shown.last, scanned)
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
	if err := s.checkWriteSize(c, int64(len(a.Content))); err != nil {
		return failed(err)
	}
	// Folders on the way are made once the write may go ahead.
	e, err := c.ws.resolve(a.Path, false)
	if err != nil {
		return failed(err)
	}
	defer e.close()
	if err := s.writeEntry(c, e, a.Content); err != nil {
		return failed(fmt.Errorf("write %s: %w", a.Path, err))
	}
	lines := strings.Count(a.Content, "\n")
	if a.Content != "" && !strings.HasSuffix(a.Content, "\n") {
		lines++
	}
	return ok(fmt.Sprintf("wrote %d bytes (%d lines) to %s", len(a.Content), lines, e.rel))
}

type patchArgs struct {
	Path       string `json:"path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all"`
}

// patchLoose applies a patch whose old_string is not in the file as is but
// matches one of findLoose's looser ways.
func (s *Service) patchLoose(c *call, e *entry, text string, a patchArgs) outcome {
	m, found := findLoose(text, a.OldString, a.NewString)
	switch {
	case !found:
		return failed(fmt.Errorf("old_string was not found in %s; read the file and copy the exact text, including whitespace and indentation", a.Path))
	case len(m.ranges) > 1 && !a.ReplaceAll:
		return failed(fmt.Errorf("old_string occurs %d times in %s (%s); include more surrounding lines to make it unique, or set replace_all to true", len(m.ranges), a.Path, m.how))
	}
	if err := s.writeEntry(c, e, m.apply(text)); err != nil {
		return failed(fmt.Errorf("write %s: %w", a.Path, err))
	}
	return ok(fmt.Sprintf("replaced %d occurrence(s) in %s (matched %s)", len(m.ranges), e.rel, m.how))
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
	e, err := c.ws.resolve(a.Path, false)
	if err != nil {
		return failed(err)
	}
	defer e.close()
	if !e.exists() {
		return failed(fmt.Errorf("%s does not exist; use write_file to create it", a.Path))
	}
	if err := checkRegular(e, a.Path); err != nil {
		return failed(err)
	}
	limit := s.cfg.Files.MaxWriteBytes
	data, err := e.readAll(limit)
	if errors.Is(err, errTooLarge) {
		return failed(&toolError{status: statusError, correctable: true, msg: fmt.Sprintf(
			"error: %s is larger than %s, the most one call may write (files.max_write_bytes); patch cannot rewrite it", a.Path, sizeText(limit))})
	}
	if err != nil {
		return failed(fmt.Errorf("read %s: %w", a.Path, err))
	}
	text := string(data)
	switch n := strings.Count(text, a.OldString); {
	case n == 0:
		return s.patchLoose(c, e, text, a)
	case n > 1 && !a.ReplaceAll:
		return failed(fmt.Errorf("old_string occurs %d times in %s; include more surrounding lines to make it unique, or set replace_all to true", n, a.Path))
	default:
		// The size it would have, before it is made in memory.
		if err := s.checkWriteSize(c, int64(len(text))+int64(n)*int64(len(a.NewString)-len(a.OldString))); err != nil {
			return failed(err)
		}
		text = strings.ReplaceAll(text, a.OldString, a.NewString)
		if err := s.writeEntry(c, e, text); err != nil {
			return failed(fmt.Errorf("write %s: %w", a.Path, err))
		}
		return ok(fmt.Sprintf("replaced %d occurrence(s) in %s", n, e.rel))
	}
}
