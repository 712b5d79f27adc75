package telemetry

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// budgetAlerts counts budget alerts fired by this process; each alert is
// fired by one process only, so the sum over processes counts each once.
var budgetAlerts = counter("herald_budget_alerts_total",
	"Budget alerts fired (herald.alerts.budget), by scope (tenant, key, schedule), id, tenant, window and threshold (percent).",
	"scope", "id", "tenant", "window", "threshold")

func init() { registry.MustRegister(budgetAlerts) }

// BudgetAlert counts one budget alert.
func BudgetAlert(scope, id, tenant, window string, threshold float64) {
	budgetAlerts.WithLabelValues(scope, id, tenant, window, strconv.FormatFloat(threshold, 'f', -1, 64)).Inc()
}

var _ prometheus.Collector = budgetAlerts
