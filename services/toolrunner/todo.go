package toolrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// todoItem is one entry of a session's task list.
type todoItem struct {
	ID      string `json:"id"`
	Content string `json:"content"`
	Status  string `json:"status"`
}

var todoStatuses = map[string]bool{"pending": true, "in_progress": true, "completed": true, "cancelled": true}

type todoArgs struct {
	Todos *[]todoItem `json:"todos"`
}

// todo reads the session's task list, or replaces it when todos is given.
// The list lives in the runner's state bucket, so every runner sees it.
func (s *Service) todo(ctx context.Context, c *call) outcome {
	var a todoArgs
	if err := decodeArgs(c.spec.Name, c.spec.Parameters, c.req.GetArguments(), &a); err != nil {
		return failed(err)
	}
	key := todoKey(c.req.GetSessionId())
	if a.Todos == nil {
		items, err := s.readTodos(ctx, key)
		if err != nil {
			return failed(err)
		}
		return ok(renderTodos(items))
	}
	items := *a.Todos
	if err := checkTodos(items); err != nil {
		return failed(argError(c.spec.Name, c.spec.Parameters, err.Error()))
	}
	data, _ := json.Marshal(items)
	if _, err := s.state.Put(ctx, key, data); err != nil {
		return failed(fmt.Errorf("save the todo list: %w", err))
	}
	return ok(renderTodos(items))
}

func checkTodos(items []todoItem) error {
	seen := map[string]bool{}
	for i, it := range items {
		switch {
		case strings.TrimSpace(it.ID) == "":
			return fmt.Errorf("field \"todos[%d].id\" is required", i)
		case seen[it.ID]:
			return fmt.Errorf("field \"todos[%d].id\" repeats id %q", i, it.ID)
		case strings.TrimSpace(it.Content) == "":
			return fmt.Errorf("field \"todos[%d].content\" is required", i)
		case !todoStatuses[it.Status]:
			return fmt.Errorf("field \"todos[%d].status\" must be one of pending, in_progress, completed, cancelled", i)
		}
		seen[it.ID] = true
	}
	return nil
}

func (s *Service) readTodos(ctx context.Context, key string) ([]todoItem, error) {
	e, err := s.state.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the todo list: %w", err)
	}
	var items []todoItem
	if err := json.Unmarshal(e.Value(), &items); err != nil {
		return nil, fmt.Errorf("read the todo list: %w", err)
	}
	return items, nil
}

// renderTodos is the list as JSON with a count of what is still open.
func renderTodos(items []todoItem) string {
	open := 0
	for _, it := range items {
		if it.Status == "pending" || it.Status == "in_progress" {
			open++
		}
	}
	if items == nil {
		items = []todoItem{}
	}
	data, _ := json.Marshal(map[string]any{"todos": items, "open": open, "total": len(items)})
	return string(data)
}
