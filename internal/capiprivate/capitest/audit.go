package capitest

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"time"
)

// UserAgentPrefix starts the User-Agent of every simulated pod: capitest/<pod name>. kube-apiserver's audit log records
// it, so a test can prove that a stopped pod sent nothing (a rollback stops the actors before its first delete).
const UserAgentPrefix = "capitest/"

// AuditEvent is what the harness reads of a kube-apiserver audit event (level Metadata).
type AuditEvent struct {
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent  string `json:"userAgent"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	ObjectRef  struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	Stage                    string    `json:"stage"`
}

// ReadAudit returns the events of a JSON-lines audit log that match keep (nil keeps all).
func ReadAudit(path string, keep func(*AuditEvent) bool) ([]AuditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev AuditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if keep == nil || keep(&ev) {
			out = append(out, ev)
		}
	}
	return out, sc.Err()
}

// FromPod keeps the events of requests a simulated pod sent (its User-Agent starts with capitest/<pod>).
func FromPod(pod string) func(*AuditEvent) bool {
	return func(ev *AuditEvent) bool {
		return strings.HasPrefix(ev.UserAgent, UserAgentPrefix+pod+" ") || ev.UserAgent == UserAgentPrefix+pod
	}
}
