package scripted

import "sync"

// Conversation answers the n-th reply to a history holding n assistant
// messages; past the end it repeats the last reply.
func Conversation(replies ...Reply) Script {
	return func(r *Request) Reply {
		n := r.AssistantCount()
		if n >= len(replies) {
			n = len(replies) - 1
		}
		return replies[n]
	}
}

// FailFirst answers fail to the first n attempts of each step of each
// conversation (a step is identified by the history's assistant count), then
// defers to next. It injects provider errors that a retry gets past.
func FailFirst(n int, fail Reply, next Script) Script {
	var mu sync.Mutex
	seen := map[string]int{}
	return func(r *Request) Reply {
		key := r.FirstUser() + "\x00" + string(rune('0'+r.AssistantCount()))
		mu.Lock()
		seen[key]++
		k := seen[key]
		mu.Unlock()
		if k <= n {
			return fail
		}
		return next(r)
	}
}

// Demo is the script of `herald demo`: write a file, read it back, answer.
func Demo() Script {
	return Conversation(
		Reply{Content: "I'll write the greeting to a file first.", ToolCalls: []Call{{Name: "write_file",
			Args: `{"path":"hello.txt","content":"Hello from Herald!\nEvery step of this run went over NATS JetStream.\n"}`}}},
		Reply{Content: "Now let me read it back to check.", ToolCalls: []Call{{Name: "read_file", Args: `{"path":"hello.txt"}`}}},
		Reply{Content: "Done. I wrote hello.txt in the workspace and read it back: it says \"Hello from Herald!\" " +
			"and notes that every step went over NATS JetStream. Costs for this run are below.", ChunkChars: 6},
	)
}
