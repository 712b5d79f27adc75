package main

import (
	"flag"
	"fmt"

	"github.com/heraldrun/herald/proto"
)

const reasoningUsage = "reasoning effort for reasoning models: minimal, low, medium, high or off (default: herald.yaml's reasoning)"

// registerReasoning adds --reasoning: the task's reasoning_effort. A value
// outside the efforts is a usage error when the flag is parsed.
func (f *runFlags) registerReasoning(fs *flag.FlagSet) {
	fs.Func("reasoning", reasoningUsage, func(v string) error {
		if v == "" || !proto.ValidReasoningEffort(v) {
			return fmt.Errorf("must be minimal, low, medium, high or off, got %q", v)
		}
		f.reasoning = v
		return nil
	})
}

// setReasoning is /reasoning [EFFORT]: the effort of the next turns ("" shows it).
func (c *chat) setReasoning(arg string) {
	out := c.cio.err
	if arg != "" {
		if !proto.ValidReasoningEffort(arg) {
			fmt.Fprintf(out, "usage: /reasoning minimal|low|medium|high|off (got %q)\n", arg)
			return
		}
		c.flags.reasoning = arg
	}
	if c.flags.reasoning == "" {
		fmt.Fprintln(out, "reasoning: as herald.yaml sets it")
		return
	}
	fmt.Fprintf(out, "reasoning %s\n", c.flags.reasoning)
}
