package clusters

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

var dcmSizeRE = regexp.MustCompile(`^([0-9]+)(MB|GB|TB)$`)

// CheckSize bounds a size (in bytes) to [min, max].
func CheckSize(s string, q, min, max resource.Quantity) error {
	if q.Cmp(min) < 0 {
		return fmt.Errorf("%q is smaller than %s", s, humanBytes(min))
	}
	if q.Cmp(max) > 0 {
		return fmt.Errorf("%q is larger than %s", s, humanBytes(max))
	}
	return nil
}

// humanBytes writes a binary quantity the way the API's sizes are written (1Gi → 1GiB).
func humanBytes(q resource.Quantity) string { return q.String() + "B" }

// ParseSize reads a DCM size (MB, GB, TB are MiB, GiB, TiB) or a Kubernetes quantity; it must be positive.
// The syntax is bounded before anything is parsed: arithmetic on a quantity such as 9e9999999 takes seconds of CPU,
// which no request may cost.
func ParseSize(s string) (resource.Quantity, error) {
	if len(s) > maxSizeLen {
		return resource.Quantity{}, fmt.Errorf("%q is not a size: at most %d characters", truncate(s, maxSizeLen), maxSizeLen)
	}
	if m := exponentRE.FindStringSubmatch(s); m != nil {
		if e, err := strconv.Atoi(m[1]); err != nil || e > 30 || e < -30 {
			return resource.Quantity{}, fmt.Errorf("%q is not a size: exponent out of range", s)
		}
	}
	if m := dcmSizeRE.FindStringSubmatch(s); m != nil {
		unit := map[string]string{"MB": "Mi", "GB": "Gi", "TB": "Ti"}[m[2]]
		q, err := resource.ParseQuantity(strings.TrimLeft(m[1], "0") + unit)
		if err != nil || q.Sign() <= 0 {
			return resource.Quantity{}, fmt.Errorf("%q must be greater than zero", s)
		}
		return q, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q is not a size: use a number with MB, GB or TB (e.g. 32GB) or a Kubernetes quantity (e.g. 32Gi)", s)
	}
	if q.Sign() <= 0 {
		return resource.Quantity{}, fmt.Errorf("%q must be greater than zero", s)
	}
	return q, nil
}

// maxSizeLen bounds a size string; exponentRE finds a decimal exponent (1e12).
const maxSizeLen = 32

var exponentRE = regexp.MustCompile(`[eE]([+-]?[0-9]+)$`)

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
