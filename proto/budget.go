package proto

// BudgetAlert is published on herald.alerts.budget, once per window, period
// and threshold across every gateway, when a budget window's spend crosses
// one of budgets.alert_thresholds (percentages), and at 100 when a call is
// refused because the window is used up.
type BudgetAlert struct {
	// Tenant is the tenant of the call that crossed the threshold (for a
	// key's or a schedule's window too).
	Tenant string `json:"tenant"`
	// Scope is whose window it is: tenant, key or schedule; ID names it
	// (the tenant, the API key id or the schedule id).
	Scope string `json:"scope"`
	ID    string `json:"id"`
	// Window is total, daily or monthly; Period the day (2026-12-03) or
	// month (2026-12) in budgets.timezone, or "all" for the total.
	Window    string  `json:"window"`
	Period    string  `json:"period"`
	Spent     float64 `json:"spent"`
	Limit     float64 `json:"limit"`
	Threshold float64 `json:"threshold"`
	// Refused: a call was refused because the window is used up.
	Refused bool   `json:"refused,omitempty"`
	TS      string `json:"ts"`
}
