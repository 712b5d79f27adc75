package toolrunner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// maxSearchFileBytes skips files too large to be source (logs, dumps).
const maxSearchFileBytes = 4 << 20

var skippedDirs = map[string]bool{".git": true, "node_modules": true, ".herald": true, "__pycache__": true, ".venv": true}

type searchArgs struct {
	Pattern  string `json:"pattern"`
	Path     string `json:"path"`
	FileGlob string `json:"file_glob"`
}

// searchFiles searches file contents with a regular expression, or, when the
// pattern is empty or "*" and file_glob is set, lists the files whose names
// match the glob. Results are capped.
func (s *Service) searchFiles(ctx context.Context, c *call) outcome {
	var a searchArgs
	if err := decodeArgs(c.spec.Name, c.spec.Parameters, c.req.GetArguments(), &a); err != nil {
		return failed(err)
	}
	if a.Path == "" {
		a.Path = "."
	}
	dir, err := c.ws.resolve(a.Path)
	if err != nil {
		return failed(err)
	}
	if _, err := os.Stat(dir); err != nil {
		return failed(fmt.Errorf("%s does not exist", a.Path))
	}
	byName := a.FileGlob != "" && (a.Pattern == "" || a.Pattern == "*")
	var re *regexp.Regexp
	if !byName {
		if re, err = regexp.Compile(a.Pattern); err != nil || a.Pattern == "" {
			return failed(argError(c.spec.Name, c.spec.Parameters, fmt.Sprintf("field \"pattern\" is not a valid regular expression: %v", err)))
		}
	}
	hits, more, err := s.walk(ctx, c.ws, dir, a.FileGlob, re)
	if err != nil {
		return failed(err)
	}
	return ok(renderHits(hits, more, s.cfg.SearchMaxResults, byName))
}

// walk visits the files under dir matching glob: with re, each matching line
// is a hit ("path:line: text"); without, each file is.
func (s *Service) walk(ctx context.Context, ws workspace, dir, glob string, re *regexp.Regexp) ([]string, bool, error) {
	var hits []string
	limit := s.cfg.SearchMaxResults
	errFull := errors.New("full")
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if (skippedDirs[d.Name()] && p != dir) || ws.isHidden(p) {
				return filepath.SkipDir
			}
			return nil
		}
		rel := ws.rel(p)
		if !d.Type().IsRegular() || !globMatch(glob, rel) {
			return nil
		}
		if re == nil {
			hits = append(hits, rel)
		} else {
			hits = append(hits, grepFile(p, rel, re, limit+1-len(hits))...)
		}
		if len(hits) > limit {
			return errFull
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFull) {
		return nil, false, err
	}
	more := len(hits) > limit
	if more {
		hits = hits[:limit]
	}
	return hits, more, nil
}

func globMatch(glob, rel string) bool {
	if glob == "" {
		return true
	}
	if ok, _ := filepath.Match(glob, filepath.Base(rel)); ok {
		return true
	}
	ok, _ := filepath.Match(glob, rel)
	return ok
}

func grepFile(p, rel string, re *regexp.Regexp, room int) []string {
	info, err := os.Stat(p)
	if err != nil || info.Size() > maxSearchFileBytes {
		return nil
	}
	data, err := os.ReadFile(p)
	if err != nil || bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxSearchFileBytes)
	for n := 1; sc.Scan() && len(out) < room; n++ {
		if line := sc.Text(); re.MatchString(line) {
			out = append(out, fmt.Sprintf("%s:%d: %s", rel, n, cutLine(strings.TrimSpace(line))))
		}
	}
	return out
}

func renderHits(hits []string, more bool, limit int, byName bool) string {
	what := "matching lines"
	if byName {
		what = "matching files"
	}
	if len(hits) == 0 {
		return "no " + what
	}
	out := strings.Join(hits, "\n")
	if more {
		out += fmt.Sprintf("\n[showing the first %d %s; narrow the pattern, path or file_glob for the rest]", limit, what)
	}
	return out
}
