package crds_test

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/crds"
)

// readPins reads hypershift-pins.txt: module → version, and the HyperShift commit the pins come from.
func readPins(t *testing.T) (map[string]string, string) {
	t.Helper()
	f, err := os.Open("hypershift-pins.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pins, commit := map[string]string{}, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 0 || strings.HasPrefix(fields[0], "#"):
		case fields[0] == "hypershift" && len(fields) >= 3:
			commit = fields[2]
		case len(fields) == 2:
			pins[fields[0]] = fields[1]
		default:
			t.Fatalf("hypershift-pins.txt: unexpected line %q", sc.Text())
		}
	}
	return pins, commit
}

// TestPinsAreHyperShifts: the modules the private CRDs are generated from are the recorded HyperShift pins, and
// the two modules the conversion webhook links (Cluster API's converters, CAPIBM's) are required at the same
// versions by go.mod. hack/capi-crds.sh reads the same file, and `make verify` regenerates the CRDs from it.
func TestPinsAreHyperShifts(t *testing.T) {
	pins, commit := readPins(t)
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(commit) {
		t.Errorf("hypershift-pins.txt names no HyperShift commit: %q", commit)
	}
	for _, m := range []string{crds.CAPIModule, crds.CAPKModule, crds.CAPAModule, crds.CAPZModule, crds.CAPGModule, crds.CAPIBMModule, crds.CAPOModule} {
		mod, ver, _ := strings.Cut(m, "@")
		if pins[mod] != ver {
			t.Errorf("%s: pinned %q in hypershift-pins.txt", m, pins[mod])
		}
		delete(pins, mod)
	}
	for mod := range pins {
		t.Errorf("hypershift-pins.txt pins %s, which no CRD source uses", mod)
	}
	gomod, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{crds.CAPIModule, crds.CAPIBMModule} {
		mod, ver, _ := strings.Cut(m, "@")
		if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(mod) + `\s+` + regexp.QuoteMeta(ver) + `\s*$`).Match(gomod) {
			t.Errorf("go.mod does not require %s %s (the webhook's converters must be the CRDs' version)", mod, ver)
		}
	}
}
