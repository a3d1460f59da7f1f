//lint:file-ignore SA1019 the deprecated v1beta1 (and ipam v1alpha1) API packages are what this webhook serves.

package webhook

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	ibmv1beta2 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	utilconversion "sigs.k8s.io/cluster-api/util/conversion"
	"sigs.k8s.io/randfill"
)

// Upstream's own fuzz test, through the private scheme, where it needs no upstream fuzzer functions: those of
// api/core/v1beta1's conversion_test.go (about 1,000 lines, test-only, not importable) normalise the known-lossy
// fields of the other kinds. TestHandlerRoundTripFuzz covers every kind through the handler instead.
func TestFuzzyConversionMachineDrainRule(t *testing.T) {
	t.Parallel()
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	utilconversion.FuzzTestFunc(utilconversion.FuzzTestFuncInput{
		Scheme: s, Hub: &clusterv1.MachineDrainRule{}, Spoke: &clusterv1beta1.MachineDrainRule{},
	})(t)
}

// realisticRefs keeps fuzzed values within what the converters, JSON and the CRD schemas accept: refs name a group
// the getter knows, JSON values are JSON, schemas do not recurse without bound, lists hold no null element.
func realisticRefs(_ runtimeserializer.CodecFactory) []any {
	return []any{
		func(in *clusterv1.ContractVersionedObjectReference, c randfill.Continue) {
			if c.Bool() {
				*in = clusterv1.ContractVersionedObjectReference{}
				return
			}
			in.APIGroup = []string{"infrastructure.cluster.hypershift.openshift.io", "hypershift.openshift.io"}[c.Intn(2)]
			in.Kind = fmt.Sprintf("Kind%d", c.Intn(10))
			in.Name = fmt.Sprintf("name-%d", c.Intn(10))
		},
		func(in *apiextensionsv1.JSON, c randfill.Continue) {
			in.Raw = fmt.Appendf(nil, `{"key%d":"value%d"}`, c.Intn(10), c.Intn(10))
		},
		func(in *clusterv1.JSONSchemaProps, c randfill.Continue) {
			*in = clusterv1.JSONSchemaProps{Type: []string{"string", "integer", "boolean"}[c.Intn(3)], Description: c.String(20)}
		},
		// CAPIBM's list items are objects in its schema: kube-apiserver never sends a null element (its converter
		// dereferences each one).
		func(in *[]*ibmv1beta2.IBMVPCResourceReference, c randfill.Continue) {
			*in = nil
			for range c.Intn(3) {
				ref := &ibmv1beta2.IBMVPCResourceReference{}
				c.Fill(ref)
				*in = append(*in, ref)
			}
		},
	}
}

// pruneEmpty drops what omitempty would: null, "", false, 0, empty objects and lists (recursively).
func pruneEmpty(v any) (any, bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if p, keep := pruneEmpty(e); keep {
				v[k] = p
			} else {
				delete(v, k)
			}
		}
		return v, len(v) > 0
	case []any:
		for i, e := range v {
			v[i], _ = pruneEmpty(e)
		}
		return v, len(v) > 0
	case string:
		return v, v != ""
	case bool:
		return v, v
	case float64:
		return v, v != 0
	}
	return v, v != nil
}

func pruned(t *testing.T, raw []byte) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	p, _ := pruneEmpty(m)
	return p
}

// Every kind, fuzzed at v1beta2 with upstream's fuzzer (util/conversion.GetFuzzer), goes through the real handler
// and the private scheme to each older served version and back, and comes back as it was, up to the values
// omitempty drops (upstream's fuzzer functions normalise the same: empty structs, zero timeouts). CAPIBM's kinds
// must convert both ways; their converters keep no conversion-data for most kinds, so what only v1beta2 holds is
// lost on the way back, as it is whoever serves CAPIBM's conversion.
func TestHandlerRoundTripFuzz(t *testing.T) {
	t.Parallel()
	g := &recordingGetter{}
	w := newOffline(t, g.get)
	fuzzer := utilconversion.GetFuzzer(w.Scheme, realisticRefs)
	hubs := map[schema.GroupKind][]string{}
	var hubGVKs []schema.GroupVersionKind
	for gvk := range w.Scheme.AllKnownTypes() {
		obj, _ := w.Scheme.New(gvk)
		if _, isHub := obj.(interface{ Hub() }); isHub {
			hubGVKs = append(hubGVKs, gvk)
			continue
		}
		hubs[gvk.GroupKind()] = append(hubs[gvk.GroupKind()], gvk.Version)
	}
	sort.Slice(hubGVKs, func(i, j int) bool { return hubGVKs[i].Kind < hubGVKs[j].Kind })
	for _, hub := range hubGVKs {
		t.Run(hub.Kind, func(t *testing.T) {
			typ := w.Scheme.AllKnownTypes()[hub]
			for i := 0; i < 100 && !t.Failed(); i++ {
				obj := reflect.New(typ).Interface().(runtime.Object)
				fuzzer.Fill(obj)
				obj.GetObjectKind().SetGroupVersionKind(hub)
				before, err := json.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				for _, spoke := range hubs[hub.GroupKind()] {
					down := review(t, w.Handler(), schema.GroupVersion{Group: hub.Group, Version: spoke}.String(), json.RawMessage(before))
					if down.Result.Status != "Success" {
						t.Fatalf("to %s: %s", spoke, down.Result.Message)
					}
					up := review(t, w.Handler(), hub.GroupVersion().String(), json.RawMessage(down.ConvertedObjects[0].Raw))
					if up.Result.Status != "Success" {
						t.Fatalf("from %s: %s", spoke, up.Result.Message)
					}
					if hub.Group == InfrastructureGroup {
						continue // CAPIBM's converters are lossy both ways (see lossyV1beta1Writes): converting is what is checked
					}
					if d := cmp.Diff(pruned(t, before), pruned(t, up.ConvertedObjects[0].Raw)); d != "" {
						t.Errorf("v1beta2 → %s → v1beta2 differs (-before +after):\n%s", spoke, d)
					}
				}
			}
		})
	}
}
