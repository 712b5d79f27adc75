package proto

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecodeTask feeds arbitrary bytes to the decoder of herald.tasks: it
// must never panic, every rejection must wrap ErrInvalidTask (the loop
// dead-letters on it), and an accepted task must be valid and survive a
// re-encode unchanged. Seeds: testdata/fuzz/FuzzDecodeTask.
func FuzzDecodeTask(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := DecodeTask(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidTask) {
				t.Fatalf("rejection %q does not wrap ErrInvalidTask", err)
			}
			if !reflect.DeepEqual(task, Task{}) && task.Validate() == nil {
				t.Fatalf("rejected a valid task: %v", err)
			}
			return
		}
		if verr := task.Validate(); verr != nil {
			t.Fatalf("accepted an invalid task: %v", verr)
		}
		again, err := json.Marshal(task)
		if err != nil {
			t.Fatalf("accepted task does not encode: %v", err)
		}
		back, err := DecodeTask(again)
		if err != nil {
			t.Fatalf("re-encoded task %s is rejected: %v", again, err)
		}
		if !reflect.DeepEqual(normalise(back), normalise(task)) {
			t.Fatalf("task changed through a re-encode:\n%+v\n%+v", task, back)
		}
	})
}

// normalise maps empty collections to nil: JSON cannot tell them apart.
func normalise(t Task) Task {
	if len(t.Toolsets) == 0 {
		t.Toolsets = nil
	}
	if len(t.Metadata) == 0 {
		t.Metadata = nil
	}
	return t
}

// FuzzInput decodes arbitrary answers on herald.session.<sid>.input as the
// tool runner does: garbage is an error, never a panic, and an accepted
// answer round-trips. Seeds: testdata/fuzz/FuzzInput.
func FuzzInput(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var in Input
		if err := json.Unmarshal(data, &in); err != nil {
			return
		}
		roundTrip(t, in)
	})
}

// FuzzInterrupt decodes arbitrary interrupt bodies (an empty body is valid).
// Seeds: testdata/fuzz/FuzzInterrupt.
func FuzzInterrupt(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var in Interrupt
		if len(data) == 0 {
			return
		}
		if err := json.Unmarshal(data, &in); err != nil {
			return
		}
		roundTrip(t, in)
	})
}

func roundTrip[T any](t *testing.T, v T) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("decoded %T does not encode: %v", v, err)
	}
	var back T
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("re-encoded %T %s does not decode: %v", v, b, err)
	}
	if !reflect.DeepEqual(back, v) {
		t.Fatalf("%T changed through a re-encode: %+v vs %+v", v, v, back)
	}
}
