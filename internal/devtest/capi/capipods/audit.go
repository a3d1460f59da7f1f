package capipods

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// UserAgentPrefix starts the User-Agent of every simulated pod: capipods/<pod name>. kube-apiserver's audit log records
// it, so a test can prove that a stopped pod sent nothing (a rollback stops the actors before its first delete).
const UserAgentPrefix = "capipods/"

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

// ReadAudit returns the events of a JSON-lines audit log that match keep (nil keeps all), oldest first: the
// files kube-apiserver rotated away (<name>-<time><ext> beside it, whose names sort by time) and then the log itself.
// A long test run fills a log past its size limit, and a rotated file must neither hide events nor "prove" that
// nothing was sent.
//
// The files are opened before any is read, and only once a second listing shows the same names: kube-apiserver
// rotates by renaming the log and starting a new one, and reading takes long enough (hundreds of MB under -race)
// for a rotation to happen meanwhile. An open file is read whole even after it was renamed, so what was logged
// before the call is all read; what is logged after it may be missed.
//
// Only lines that contain line ("" for every line) are decoded: a test's log holds hundreds of thousands of
// events, and decoding each under -race costs more than reading them.
func ReadAudit(path, line string, keep func(*AuditEvent) bool) ([]AuditEvent, error) {
	files, err := openAudit(path)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	return readAudit(files, []byte(line), keep)
}

// openAudit opens the files of the audit log at path, oldest first, as of a moment when no rotation was under way.
func openAudit(path string) ([]*os.File, error) {
	for range 10 {
		names, err := AuditFiles(path)
		if err != nil {
			return nil, err
		}
		files := make([]*os.File, 0, len(names))
		for _, n := range names {
			f, err := os.Open(n)
			if err != nil {
				break // renamed away between the listing and the open: list again
			}
			files = append(files, f)
		}
		again, err := AuditFiles(path)
		if err == nil && len(files) == len(names) && slices.Equal(names, again) {
			return files, nil
		}
		for _, f := range files {
			_ = f.Close()
		}
		if err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("the audit log %s kept rotating while its files were opened", path)
}

func readAudit(files []*os.File, line []byte, keep func(*AuditEvent) bool) ([]AuditEvent, error) {
	var out []AuditEvent
	var err error
	for _, f := range files {
		if out, err = readAuditFile(f, line, keep, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AuditFiles lists the files of the audit log at path, oldest first: those kube-apiserver rotated away, then the log.
func AuditFiles(path string) ([]string, error) {
	ext := filepath.Ext(path)
	rotated, err := filepath.Glob(strings.TrimSuffix(path, ext) + "-*" + ext)
	if err != nil {
		return nil, err
	}
	sort.Strings(rotated)
	return append(rotated, path), nil
}

func readAuditFile(f *os.File, line []byte, keep func(*AuditEvent) bool, out []AuditEvent) ([]AuditEvent, error) {
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), line) {
			continue
		}
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

// FromPod keeps the events of requests a simulated pod sent (its User-Agent starts with capipods/<pod>); PodLine is
// what each of their lines contains.
func FromPod(pod string) func(*AuditEvent) bool {
	return func(ev *AuditEvent) bool {
		return strings.HasPrefix(ev.UserAgent, UserAgentPrefix+pod+" ") || ev.UserAgent == UserAgentPrefix+pod
	}
}

// PodLine is what every audit line of a request from simulated pods whose names start with prefix contains (ReadAudit's
// line).
func PodLine(prefix string) string { return UserAgentPrefix + prefix }
