package status

// Report is one cluster's status as the status events carry it: the status and message in the configured
// vocabulary, and what the cluster produced.
type Report struct {
	Status  Status
	Message string
	Output  Output
}

// Output is what a cluster produced, published as the events' output_spec: its API endpoint and console URL once
// the cluster has completed its installation, until its deletion starts. Never a kubeconfig or any other secret:
// the event stream is no place for credentials.
type Output struct {
	APIEndpoint string `json:"api_endpoint,omitempty"`
	ConsoleURL  string `json:"console_url,omitempty"`
}

// Empty reports whether nothing is known yet.
func (o Output) Empty() bool { return o == Output{} }
