package loop

import (
	"fmt"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// cheapTools cost so little that a step calling only them gives its
// iteration back: planning with todo should not eat the working budget,
// and a step of execute_code stands for the many steps its program made.
var cheapTools = map[string]bool{"todo": true, "execute_code": true}

// hardCapFactor bounds the model calls of a turn whatever the refunds:
// a model that only ever plans still stops.
const hardCapFactor = 2

// refundCheapStep gives back the iteration of a step whose every call was
// to a cheap tool.
func (st *State) refundCheapStep() {
	if st.Pending == nil || len(st.Pending.Calls) == 0 {
		return
	}
	for _, c := range st.Pending.Calls {
		if c.Local || !cheapTools[c.Tool] {
			return
		}
	}
	st.Refunds++
}

// budgetSpent reports whether the iteration budget (model calls minus
// refunds) or the hard cap on model calls is used up.
func (st *State) budgetSpent() bool {
	return st.Step-st.Refunds >= st.MaxIterations || st.Step >= hardCapFactor*st.MaxIterations
}

// moneySpent is the final response of a turn stopped by its money budget.
func moneySpent(st *State, msgs []*heraldpb.ChatMessage) string {
	final := fmt.Sprintf("Stopped: this task spent $%.4f of its $%.4f budget (max_cost_usd), so no further model calls were made.", st.CostUSD, st.MaxCostUSD)
	if found := lastAssistantText(msgs); found != "" {
		final += " Last progress: " + found
	}
	return final
}
