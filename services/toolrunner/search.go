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
	e, err := c.ws.resolve(a.Path, false)
	if err != nil {
		return failed(err)
	}
	defer e.close()
	if !e.exists() {
		return failed(fmt.Errorf("%s does not exist", a.Path))
	}
	byName := a.FileGlob != "" && (a.Pattern == "" || a.Pattern == "*")
	var re *regexp.Regexp
	if !byName {
		if re, err = regexp.Compile(a.Pattern); err != nil || a.Pattern == "" {
			return failed(argError(c.spec.Name, c.spec.Parameters, fmt.Sprintf("field \"pattern\" is not a valid regular expression: %v", err)))
		}
	}
	hits, more, err := s.walk(ctx, c.ws, e, a.FileGlob, re)
	if err != nil {
		return failed(err)
	}
	return ok(renderHits(hits, more, s.cfg.SearchMaxResults, byName))
}

// walk visits the files at or under e matching glob: with re, each matching
// line is a hit ("path:line: text"); without, each file is.
func (s *Service) walk(ctx context.Context, ws workspace, e *entry, glob string, re *regexp.Regexp) ([]string, bool, error) {
	var hits []string
	limit := s.cfg.SearchMaxResults
	visit := func(dir *os.Root, name, rel string, info fs.FileInfo) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if info.IsDir() {
			if skippedDirs[name] {
				return fs.SkipDir
			}
			return nil
		}
		if !info.Mode().IsRegular() || !globMatch(glob, rel) {
			return nil
		}
		if re == nil {
			hits = append(hits, rel)
		} else {
			f := &entry{dir: dir, name: name, rel: rel, info: info}
			hits = append(hits, grepFile(f, re, limit+1-len(hits))...)
		}
		if len(hits) > limit {
			return fs.SkipAll
		}
		return nil
	}
	var err error
	switch {
	case !e.info.IsDir():
		err = visit(e.dir, e.name, e.rel, e.info)
		if errors.Is(err, fs.SkipAll) {
			err = nil
		}
	case e.name == ".":
		err = ws.walk(e.dir, e.rel, visit)
	default:
		var dir *os.Root
		if dir, err = openDir(e.dir, e.name, e.info); err == nil {
			err = ws.walk(dir, e.rel, visit)
			dir.Close()
		}
	}
	if err != nil {
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

func grepFile(e *entry, re *regexp.Regexp, room int) []string {
	if e.info.Size() > maxSearchFileBytes {
		return nil
	}
	data, err := e.readAll(maxSearchFileBytes)
	if err != nil || bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxSearchFileBytes)
	for n := 1; sc.Scan() && len(out) < room; n++ {
		if line := sc.Text(); re.MatchString(line) {
			out = append(out, fmt.Sprintf("%s:%d: %s", e.rel, n, cutLine(strings.TrimSpace(line))))
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
