// Package versions turns a requested cluster version into a release image.
//
// It holds the OpenShift ↔ Kubernetes compatibility matrix, parses ClusterImageSets into releases, and picks the
// highest GA patch of the requested minor. Everything here is pure: the hub's ClusterImageSets and the operator's
// supported-versions list come in as plain values.
package versions

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Minor is a major.minor version such as 4.17 or 1.30.
type Minor struct{ Major, Minor int }

func (m Minor) String() string { return fmt.Sprintf("%d.%d", m.Major, m.Minor) }

// Less orders minors numerically (4.9 < 4.10).
func (m Minor) Less(o Minor) bool {
	if m.Major != o.Major {
		return m.Major < o.Major
	}
	return m.Minor < o.Minor
}

// ParseMinor parses "4.17".
func ParseMinor(s string) (Minor, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) != 2 {
		return Minor{}, fmt.Errorf("%q is not a major.minor version", s)
	}
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || maj < 0 || min < 0 {
		return Minor{}, fmt.Errorf("%q is not a major.minor version", s)
	}
	return Minor{maj, min}, nil
}

// Matrix maps OpenShift minors to Kubernetes minors, one to one.
type Matrix struct {
	toK8s map[Minor]Minor
	toOCP map[Minor]Minor
}

// builtIn is HyperShift's table for the minors the product supports out of the box: OCP 4.14…4.21 → K8s 1.27…1.34
// (4.19, 4.20 and 4.21 are Kubernetes 1.32, 1.33 and 1.34, as DCM's own code maps them).
func builtIn() map[Minor]Minor {
	m := map[Minor]Minor{}
	for i := 0; i <= 7; i++ {
		m[Minor{4, 14 + i}] = Minor{1, 27 + i}
	}
	return m
}

// DefaultMatrix is the built-in matrix.
func DefaultMatrix() Matrix {
	m, err := NewMatrix(nil)
	if err != nil {
		panic(err) // the built-in table is one to one
	}
	return m
}

// NewMatrix merges overrides ("4.21": "1.34") over the built-in table. The result must be one to one: two OpenShift
// minors mapped to the same Kubernetes minor is an error, because the reverse lookup would be ambiguous.
func NewMatrix(overrides map[string]string) (Matrix, error) {
	toK8s := builtIn()
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ocp, err := ParseMinor(k)
		if err != nil {
			return Matrix{}, fmt.Errorf("version matrix: OpenShift key: %w", err)
		}
		k8s, err := ParseMinor(overrides[k])
		if err != nil {
			return Matrix{}, fmt.Errorf("version matrix: value of %s: %w", k, err)
		}
		if ocp.Major != 4 && ocp.Major != 5 {
			return Matrix{}, fmt.Errorf("version matrix: %s is not an OpenShift version (4.x or 5.x)", k)
		}
		if k8s.Major != 1 {
			return Matrix{}, fmt.Errorf("version matrix: %s is not a Kubernetes version (1.x)", overrides[k])
		}
		toK8s[ocp] = k8s
	}
	toOCP := make(map[Minor]Minor, len(toK8s))
	for ocp, k8s := range toK8s {
		if other, dup := toOCP[k8s]; dup {
			a, b := other, ocp
			if b.Less(a) {
				a, b = b, a
			}
			return Matrix{}, fmt.Errorf("version matrix: OpenShift %s and %s both map to Kubernetes %s; the matrix must be one to one", a, b, k8s)
		}
		toOCP[k8s] = ocp
	}
	return Matrix{toK8s: toK8s, toOCP: toOCP}, nil
}

// ParseMatrixFile reads a YAML or JSON map {"4.21": "1.34"} (the versionMatrixFile).
func ParseMatrixFile(data []byte) (map[string]string, error) {
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("version matrix file: %w", err)
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		switch x := v.(type) {
		case string:
			out[k] = x
		case float64, json.Number:
			return nil, fmt.Errorf("version matrix file: value of %q must be a quoted string such as \"1.34\" (YAML reads %v as a number)", k, x)
		default:
			return nil, fmt.Errorf("version matrix file: value of %q must be a string", k)
		}
	}
	return out, nil
}

// KubernetesFor returns the Kubernetes minor of an OpenShift minor.
func (m Matrix) KubernetesFor(ocp Minor) (Minor, bool) { k, ok := m.toK8s[ocp]; return k, ok }

// OpenShiftFor returns the OpenShift minor of a Kubernetes minor.
func (m Matrix) OpenShiftFor(k8s Minor) (Minor, bool) { o, ok := m.toOCP[k8s]; return o, ok }

// Release is a parsed OpenShift release.
type Release struct {
	Major, Minor, Patch int
	Prerelease          string // "ec.1", "rc.2", "fc.0" or "" for GA
	Arch                string // multi, x86_64, aarch64, ppc64le, s390x
}

// Version is "4.17.12" (plus "-rc.1" for pre-releases).
func (r Release) Version() string {
	v := fmt.Sprintf("%d.%d.%d", r.Major, r.Minor, r.Patch)
	if r.Prerelease != "" {
		v += "-" + r.Prerelease
	}
	return v
}

// MinorVersion is the release's minor.
func (r Release) MinorVersion() Minor { return Minor{r.Major, r.Minor} }

// Less orders releases semantically by patch (4.17.9 < 4.17.10).
func (r Release) Less(o Release) bool {
	if r.Major != o.Major {
		return r.Major < o.Major
	}
	if r.Minor != o.Minor {
		return r.Minor < o.Minor
	}
	return r.Patch < o.Patch
}

var (
	tagRE  = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)(-((?:ec|rc|fc)\.\d+))?(-(x86_64|aarch64|ppc64le|s390x|multi))?$`)
	nameRE = regexp.MustCompile(`^img(\d+)\.(\d+)\.(\d+)(-((?:ec|rc|fc)\.\d+))?-(x86-64|x86_64|aarch64|arm64|ppc64le|s390x|multi)(-appsub)?$`)
)

// ParseRelease reads the release of a ClusterImageSet: from the tag of spec.releaseImage, or from the set's name
// (img<version>-<arch>[-appsub]) when the image is pinned by digest.
func ParseRelease(name, releaseImage string) (Release, bool) {
	if !strings.Contains(releaseImage, "@") {
		if i := strings.LastIndex(releaseImage, ":"); i >= 0 && !strings.Contains(releaseImage[i:], "/") {
			if r, ok := parse(tagRE, releaseImage[i+1:]); ok {
				if r.Arch == "" {
					r.Arch = "x86_64"
				}
				return r, true
			}
		}
		return Release{}, false
	}
	r, ok := parse(nameRE, name)
	if ok {
		switch r.Arch {
		case "x86-64":
			r.Arch = "x86_64"
		case "arm64":
			r.Arch = "aarch64"
		}
	}
	return r, ok
}

func parse(re *regexp.Regexp, s string) (Release, bool) {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return Release{}, false
	}
	maj, _ := strconv.Atoi(m[1])
	min, _ := strconv.Atoi(m[2])
	pat, _ := strconv.Atoi(m[3])
	arch := m[7]
	if re == nameRE {
		arch = m[6]
	}
	return Release{Major: maj, Minor: min, Patch: pat, Prerelease: m[5], Arch: arch}, true
}

// ImageSet is the part of a hive.openshift.io/v1 ClusterImageSet that matters here.
type ImageSet struct {
	Name         string
	ReleaseImage string
	Visible      bool // label visible=true
}

// Candidate is an image set usable for new clusters.
type Candidate struct {
	ImageSet
	Release    Release
	Kubernetes Minor
}

// Catalog is the set of releases this hub can provision, with the matrix that translates versions.
type Catalog struct {
	matrix     Matrix
	candidates map[Minor][]Candidate // by OpenShift minor, best first
}

// NewCatalog filters image sets to candidates (GA, amd64-capable, minor in the matrix and, when supported is
// non-nil, in the operator's supported-versions list) and orders each minor's candidates best first.
func NewCatalog(m Matrix, sets []ImageSet, supported []string) Catalog {
	var allowed map[Minor]bool
	if supported != nil {
		allowed = map[Minor]bool{}
		for _, s := range supported {
			if mv, err := ParseMinor(s); err == nil {
				allowed[mv] = true
			}
		}
	}
	c := Catalog{matrix: m, candidates: map[Minor][]Candidate{}}
	for _, s := range sets {
		r, ok := ParseRelease(s.Name, s.ReleaseImage)
		if !ok || r.Prerelease != "" || (r.Arch != "multi" && r.Arch != "x86_64") {
			continue
		}
		k8s, ok := m.KubernetesFor(r.MinorVersion())
		if !ok || (allowed != nil && !allowed[r.MinorVersion()]) {
			continue
		}
		c.candidates[r.MinorVersion()] = append(c.candidates[r.MinorVersion()], Candidate{ImageSet: s, Release: r, Kubernetes: k8s})
	}
	for _, list := range c.candidates {
		sort.Slice(list, func(i, j int) bool { return better(list[i], list[j]) })
	}
	return c
}

// better orders candidates: highest patch, then visible, then multi-arch, then name.
func better(a, b Candidate) bool {
	if a.Release.Patch != b.Release.Patch {
		return a.Release.Patch > b.Release.Patch
	}
	if a.Visible != b.Visible {
		return a.Visible
	}
	if (a.Release.Arch == "multi") != (b.Release.Arch == "multi") {
		return a.Release.Arch == "multi"
	}
	return a.Name < b.Name
}

// KubernetesMinors lists the Kubernetes minors with at least one candidate, sorted ascending ("1.30", "1.31").
func (c Catalog) KubernetesMinors() []string {
	ms := make([]Minor, 0, len(c.candidates))
	for ocp := range c.candidates {
		k, _ := c.matrix.KubernetesFor(ocp)
		ms = append(ms, k)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Less(ms[j]) })
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.String()
	}
	return out
}

// Resolution is the outcome of resolving a requested version.
type Resolution struct {
	Requested        string // as given
	OpenShiftVersion string // "4.17.12"
	Kubernetes       string // "1.30"
	ReleaseImage     string
	ImageSetName     string
}

// ErrInvalid marks a version string that is neither a Kubernetes nor an OpenShift version (HTTP 400).
var ErrInvalid = errors.New("invalid version")

// ErrUnsupported marks a well-formed version this hub cannot provision (HTTP 422).
var ErrUnsupported = errors.New("unsupported version")

var (
	k8sRE = regexp.MustCompile(`^1\.(\d+)(\.(\d+))?$`)
	ocpRE = regexp.MustCompile(`^([45])\.(\d+)(\.(\d+))?$`)
)

// Resolve maps a requested version — Kubernetes "1.30"/"1.30.4" or OpenShift "4.17"/"4.17.3" — to a release.
// A minor (or a Kubernetes patch, which cannot pick an OpenShift patch) gets the highest available patch; an
// OpenShift patch must exist exactly.
func (c Catalog) Resolve(requested string) (Resolution, error) {
	v := strings.TrimSpace(requested)
	if m := k8sRE.FindStringSubmatch(v); m != nil {
		n, _ := strconv.Atoi(m[1])
		k8s := Minor{1, n}
		ocp, ok := c.matrix.OpenShiftFor(k8s)
		if !ok {
			return Resolution{}, fmt.Errorf("%w: Kubernetes %s is not in the version matrix (supported: %s)", ErrUnsupported, k8s, c.supportedList())
		}
		list := c.candidates[ocp]
		if len(list) == 0 {
			return Resolution{}, fmt.Errorf("%w: no ClusterImageSet for Kubernetes %s (OpenShift %s) (supported: %s)", ErrUnsupported, k8s, ocp, c.supportedList())
		}
		return c.resolution(requested, list[0]), nil
	}
	if m := ocpRE.FindStringSubmatch(v); m != nil {
		maj, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		ocp := Minor{maj, n}
		if _, ok := c.matrix.KubernetesFor(ocp); !ok {
			return Resolution{}, fmt.Errorf("%w: OpenShift %s is not in the version matrix (supported: %s)", ErrUnsupported, ocp, c.supportedList())
		}
		list := c.candidates[ocp]
		if len(list) == 0 {
			return Resolution{}, fmt.Errorf("%w: no ClusterImageSet for OpenShift %s (supported: %s)", ErrUnsupported, ocp, c.supportedList())
		}
		if m[4] == "" {
			return c.resolution(requested, list[0]), nil
		}
		patch, _ := strconv.Atoi(m[4])
		var have []string
		for _, cand := range list {
			if cand.Release.Patch == patch {
				return c.resolution(requested, cand), nil
			}
			have = append(have, cand.Release.Version())
		}
		return Resolution{}, fmt.Errorf("%w: no ClusterImageSet for OpenShift %s (available %s patches: %s)", ErrUnsupported, v, ocp, strings.Join(dedupe(have), ", "))
	}
	return Resolution{}, fmt.Errorf("%w: %q is not a Kubernetes (1.30, 1.30.4) or OpenShift (4.17, 4.17.3) version", ErrInvalid, requested)
}

func (c Catalog) resolution(requested string, cand Candidate) Resolution {
	return Resolution{
		Requested:        requested,
		OpenShiftVersion: cand.Release.Version(),
		Kubernetes:       cand.Kubernetes.String(),
		ReleaseImage:     cand.ReleaseImage,
		ImageSetName:     cand.Name,
	}
}

// supportedList renders the Kubernetes minors with their OpenShift minors: "1.30 (4.17), 1.31 (4.18)".
func (c Catalog) supportedList() string {
	ks := c.KubernetesMinors()
	if len(ks) == 0 {
		return "none: the hub has no usable ClusterImageSet"
	}
	parts := make([]string, len(ks))
	for i, k := range ks {
		km, _ := ParseMinor(k)
		o, _ := c.matrix.OpenShiftFor(km)
		parts[i] = fmt.Sprintf("%s (OpenShift %s)", k, o)
	}
	return strings.Join(parts, ", ")
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := in[:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// ParseVersion reads an OpenShift release version as HyperShift reports it ("4.17.12", "4.18.0-rc.1").
func ParseVersion(v string) (Release, bool) { return parse(tagRE, strings.TrimSpace(v)) }

// UpgradeTargets lists the releases a cluster at from may upgrade to (docs/day2.md, section "API"): a catalog release
// newer than from, at most one minor ahead, ascending ("4.17.29", "4.18.22").
func (c Catalog) UpgradeTargets(from Release) []string {
	var out []Release
	for minor, list := range c.candidates {
		if minor.Major != from.Major || minor.Minor < from.Minor || minor.Minor > from.Minor+1 {
			continue
		}
		for _, cand := range list {
			if from.Less(cand.Release) {
				out = append(out, cand.Release)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	names := make([]string, 0, len(out))
	for _, r := range out {
		names = append(names, r.Version())
	}
	return dedupe(names)
}
