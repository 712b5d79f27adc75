package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// memoryArgs are the memory tool's arguments (Hermes' names).
type memoryArgs struct {
	Action  string `json:"action"`
	Target  string `json:"target"`
	Content string `json:"content"`
	OldText string `json:"old_text"`
}

// memoryOutcome is the JSON the model sees as the tool result.
type memoryOutcome struct {
	Success bool     `json:"success"`
	Target  string   `json:"target,omitempty"`
	Message string   `json:"message,omitempty"`
	Error   string   `json:"error,omitempty"`
	Entries []string `json:"entries,omitempty"`
	Usage   string   `json:"usage,omitempty"`
}

func decodeMemoryArgs(raw string) (memoryArgs, error) {
	var a memoryArgs
	if strings.TrimSpace(raw) == "" {
		raw = "{}"
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, fmt.Errorf("%w: arguments must be a JSON object {action, target, content?, old_text?}: %v", ErrInvalidArguments, err)
	}
	switch a.Action {
	case "add", "replace", "remove", "read":
	default:
		return a, fmt.Errorf("%w: action must be add, replace, remove or read (got %q)", ErrInvalidArguments, a.Action)
	}
	switch a.Target {
	case TargetMemory, TargetUser:
	default:
		return a, fmt.Errorf("%w: target must be %q or %q (got %q)", ErrInvalidArguments, TargetMemory, TargetUser, a.Target)
	}
	a.Content = strings.TrimSpace(a.Content)
	a.OldText = strings.TrimSpace(a.OldText)
	needContent := a.Action == "add" || a.Action == "replace"
	if needContent && a.Content == "" {
		return a, fmt.Errorf("%w: %s needs a non-empty content", ErrInvalidArguments, a.Action)
	}
	if (a.Action == "replace" || a.Action == "remove") && a.OldText == "" {
		return a, fmt.Errorf("%w: %s needs old_text naming the entry", ErrInvalidArguments, a.Action)
	}
	return a, nil
}

// runMemory executes one memory tool call for tenant. Mistakes the model
// can fix come back as a failed outcome; infrastructure failures come back
// as infraErr so the call is retried.
func (s *Service) runMemory(ctx context.Context, tenant, rawArgs string) (out memoryOutcome, infraErr error) {
	a, err := decodeMemoryArgs(rawArgs)
	if err == nil {
		err = refuseInjection(a.Content)
	}
	if err != nil {
		return failed(a.Target, err), nil
	}
	entries, note, err := s.perform(ctx, tenant, a)
	if isModelError(err) {
		return failed(a.Target, err), nil
	}
	if err != nil {
		return memoryOutcome{}, err
	}
	return memoryOutcome{Success: true, Target: a.Target, Message: note, Entries: entries,
		Usage: fmt.Sprintf("%d/%d chars", joinedLen(entries), s.cfg.limit(a.Target))}, nil
}

// perform reads the store or changes it with compare-and-set.
func (s *Service) perform(ctx context.Context, tenant string, a memoryArgs) (entries []string, note string, err error) {
	if a.Action == "read" {
		entries, err = s.store.Entries(ctx, tenant, a.Target)
		return entries, fmt.Sprintf("%d entries", len(entries)), err
	}
	limit := s.cfg.limit(a.Target)
	entries, err = s.store.Update(ctx, tenant, a.Target, func(cur []string) ([]string, error) {
		var next []string
		var err error
		next, note, err = applyAction(a, cur, limit)
		return next, err
	})
	return entries, note, err
}

func refuseInjection(content string) error {
	if why := scanInjection(content); why != "" {
		return fmt.Errorf("%w (%s): memory is replayed into every future system prompt, so it must hold facts, not instructions; the entry was not saved", ErrInjection, why)
	}
	return nil
}

func failed(target string, err error) memoryOutcome {
	return memoryOutcome{Success: false, Target: target, Error: err.Error()}
}

func isModelError(err error) bool {
	if err == nil {
		return false
	}
	for _, e := range []error{ErrInvalidArguments, ErrLimitExceeded, ErrInjection, ErrNoMatch, ErrAmbiguous} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// applyAction changes entries as the call asks, keeping them unique and
// within limit. It returns a note for the model.
func applyAction(a memoryArgs, entries []string, limit int) ([]string, string, error) {
	switch a.Action {
	case "add":
		if contains(entries, a.Content) {
			return entries, "entry already present; nothing added", nil
		}
		next := append(entries, a.Content)
		return next, "entry added", checkLimit(a.Target, entries, next, limit)
	case "replace":
		i, err := findEntry(entries, a.OldText)
		if err != nil {
			return nil, "", err
		}
		if j := indexOf(entries, a.Content); j >= 0 && j != i {
			return removeAt(entries, i), "replacement already present as another entry; old entry removed", nil
		}
		next := append([]string(nil), entries...)
		next[i] = a.Content
		return next, "entry replaced", checkLimit(a.Target, entries, next, limit)
	default: // remove
		i, err := findEntry(entries, a.OldText)
		if err != nil {
			return nil, "", err
		}
		return removeAt(entries, i), "entry removed", nil
	}
}

func checkLimit(target string, before, after []string, limit int) error {
	if n := joinedLen(after); n > limit {
		return fmt.Errorf("%w: the %s store would hold %d of its %d characters (now %d); replace or remove entries first, or write a shorter entry",
			ErrLimitExceeded, target, n, limit, joinedLen(before))
	}
	return nil
}

// findEntry locates the single entry containing oldText.
func findEntry(entries []string, oldText string) (int, error) {
	found := -1
	for i, e := range entries {
		if !strings.Contains(e, oldText) {
			continue
		}
		if found >= 0 && entries[found] != e {
			return -1, fmt.Errorf("%w: %q; quote more of the entry", ErrAmbiguous, oldText)
		}
		found = i
	}
	if found < 0 {
		return -1, fmt.Errorf("%w: %q (read the store to see its entries)", ErrNoMatch, oldText)
	}
	return found, nil
}

func contains(entries []string, s string) bool { return indexOf(entries, s) >= 0 }

func indexOf(entries []string, s string) int {
	for i, e := range entries {
		if e == s {
			return i
		}
	}
	return -1
}

func removeAt(entries []string, i int) []string {
	return append(append([]string(nil), entries[:i]...), entries[i+1:]...)
}
