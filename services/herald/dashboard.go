package main

import (
	"net/http"

	"github.com/heraldrun/herald/services/accounting"
	"github.com/rs/zerolog"
)

// dashboardHandler is accounting's cost dashboard over the ClickHouse at dsn.
func dashboardHandler(dsn, token string, log zerolog.Logger) (http.Handler, error) {
	return accounting.NewDashboard(dsn, token, log), nil
}
