package main

import (
	"encoding/json"
	"net/http"

	"github.com/heraldrun/herald/services/accounting"
	"github.com/rs/zerolog"
)

// dashboardHandler serves the cost JSON until the accounting dashboard lands.
func dashboardHandler(dsn, token string, log zerolog.Logger) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/cost", func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		rep, err := accounting.QueryCost(r.Context(), dsn, accounting.CostQuery{By: r.URL.Query().Get("by")})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(rep)
	})
	return mux, nil
}
