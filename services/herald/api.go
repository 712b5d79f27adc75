package main

import (
	"net/http"

	"github.com/heraldrun/herald/services/api"
)

// apiHandler is the api service when the process runs it (nil otherwise).
type apiHandler = *api.Service

// withAPI serves the api's /v1/ routes beside the dashboard on one address;
// the api applies its own access rule (keys), the dashboard keeps its own.
func withAPI(dashboard http.Handler, svc apiHandler) http.Handler {
	if svc == nil {
		return dashboard
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", svc.Handler())
	mux.Handle("/", dashboard)
	return mux
}
