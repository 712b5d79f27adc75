package memory

// toolStatus is the status a tool run is counted under: the result's, or
// "error" when the service failed to run it (it will be redelivered).
func toolStatus(status string, err error) string {
	if err != nil {
		return "error"
	}
	return status
}
