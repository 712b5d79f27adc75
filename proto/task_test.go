package proto

import (
	"errors"
	"testing"
)

func TestTaskReasoningEffort(t *testing.T) {
	for _, effort := range []string{"minimal", "low", "medium", "high", "off"} {
		task, err := DecodeTask([]byte(`{"prompt":"hi","reasoning_effort":"` + effort + `"}`))
		if err != nil || task.ReasoningEffort != effort {
			t.Fatalf("%s: %v %+v", effort, err, task)
		}
	}
	for _, bad := range []string{`"extreme"`, `"HIGH"`, `""`} {
		_, err := DecodeTask([]byte(`{"prompt":"hi","reasoning_effort":` + bad + `}`))
		if bad == `""` {
			if err != nil {
				t.Fatalf("an empty effort keeps herald.yaml's: %v", err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidTask) || err == nil {
			t.Fatalf("%s accepted: %v", bad, err)
		}
	}
	_, err := DecodeTask([]byte(`{"prompt":"hi","reasoning_effort":7}`))
	if !errors.Is(err, ErrInvalidTask) {
		t.Fatalf("a number is refused: %v", err)
	}
}
