package toolrunner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// maxLineChars cuts single lines (minified files) so one line cannot fill a result.
const maxLineChars = 2000

// maxLineBytes is the most of one line read_file keeps: maxLineChars
// characters of the widest UTF-8. The rest of a longer line is read past,
// never held, so a file that is one 64 GiB line costs what a short one does.
const maxLineBytes = maxLineChars * utf8.UTFMax

// readScanMaxBytes is the most of a file one read_file call reads: to reach
// its offset, show its lines and count the rest. A sparse file of any size
// is a truncate away, so without a bound a call would read (zeros) for
// minutes; past it, lines are not counted and the footer says so.
const readScanMaxBytes = 256 << 20

// window is what read_file shows of a file: lines [first, first+limit),
// stopping once the text reaches maxChars.
type window struct {
	first, limit, maxChars int
}

// shownLines is a window's numbered text, the number of the last line shown
// and the lines counted; whole is false when the file went on past
// readScanMaxBytes, so total counts only the lines before it.
type shownLines struct {
	text  string
	last  int
	total int
	whole bool
}

// numberedLines returns w's lines of r as "N|text", reading at most
// readScanMaxBytes and holding at most maxLineBytes of any line.
func numberedLines(ctx context.Context, r io.Reader, w window) (shownLines, error) {
	scan := &scanReader{ctx: ctx, r: io.LimitReader(r, readScanMaxBytes+1)}
	br := bufio.NewReaderSize(scan, 64<<10)
	var b strings.Builder
	out := shownLines{}
	for out.total < w.first+w.limit-1 && b.Len() < w.maxChars {
		shown := out.total+1 >= w.first
		line, size, err := skimLine(br, shown)
		if size > 0 {
			out.total++
			if shown {
				fmt.Fprintf(&b, "%6d|%s\n", out.total, showLine(line, size))
				out.last = out.total
			}
		}
		if errors.Is(err, io.EOF) {
			out.text, out.whole = b.String(), scan.n <= readScanMaxBytes
			return out, nil
		}
		if err != nil {
			return shownLines{}, err
		}
	}
	rest, err := countLines(br)
	if err != nil {
		return shownLines{}, err
	}
	out.text, out.total, out.whole = b.String(), out.total+rest, scan.n <= readScanMaxBytes
	return out, nil
}

// skimLine reads one line of br, its newline included, and returns its
// length; keep says whether its first maxLineBytes are wanted.
func skimLine(br *bufio.Reader, keep bool) ([]byte, int64, error) {
	var line []byte
	var size int64
	for {
		chunk, err := br.ReadSlice('\n')
		size += int64(len(chunk))
		if keep && len(line) < maxLineBytes {
			line = append(line, chunk[:min(len(chunk), maxLineBytes-len(line))]...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, size, err
		}
	}
}

// countLines counts the lines left in r, a last one without a newline
// included.
func countLines(r io.Reader) (int, error) {
	buf := make([]byte, 64<<10)
	lines, open := 0, false
	for {
		n, err := r.Read(buf)
		if n > 0 {
			lines += bytes.Count(buf[:n], []byte{'\n'})
			open = buf[n-1] != '\n'
		}
		if errors.Is(err, io.EOF) {
			if open {
				lines++
			}
			return lines, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// showLine is a line as read_file shows it: without its line ending, cut
// to maxLineChars characters with a marker giving its length.
func showLine(line []byte, size int64) string {
	text := strings.TrimRight(string(line), "\r\n")
	cut, leftOut := cutChars(text, maxLineChars)
	if !leftOut && int64(len(line)) == size {
		return text
	}
	cut = strings.ToValidUTF8(cut, "")
	length := "of " + sizeText(size)
	if size > readScanMaxBytes {
		length = "longer than " + sizeText(readScanMaxBytes)
	}
	return fmt.Sprintf("%s [line truncated: %d characters shown of a line %s]", cut, utf8.RuneCountInString(cut), length)
}

// cutLine cuts s to maxLineChars characters, marking a cut.
func cutLine(s string) string {
	if cut, ok := cutChars(s, maxLineChars); ok {
		return cut + " [line truncated]"
	}
	return s
}

// cutChars returns the first n characters of s and whether that left
// anything out, without decoding more of s than it keeps.
func cutChars(s string, n int) (string, bool) {
	i := 0
	for range n {
		if i >= len(s) {
			return s, false
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i], i < len(s)
}

// scanReader reads a file for read_file: it counts what it read and stops
// when the call is cancelled or times out, whatever line it is in.
type scanReader struct {
	ctx context.Context
	r   io.Reader
	n   int64
}

func (c *scanReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
