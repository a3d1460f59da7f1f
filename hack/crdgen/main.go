// Command crdgen is the Go half of hack/crds.sh: it turns files from pinned upstream Go modules into the
// CustomResourceDefinition manifests committed under internal/devtest/sp/sphub/crds. It is not part of any binary.
//
// Usage:
//
//	crdgen strip-annotation IN OUT
//	    Copy the CRD in IN to OUT without the annotation "feature-gate.release.openshift.io/" (an empty name part,
//	    which kube-apiserver rejects, making it refuse the whole CRD). HyperShift's AAA_ungated.yaml files carry it.
//	crdgen kubevirt IN_VALIDATIONS_GO OUTDIR
//	    Build the VirtualMachine and VirtualMachineInstance CRDs the way virt-operator's
//	    pkg/virt-operator/resource/generate/components/crds.go does, around the OpenAPI schemas stored as Go raw
//	    strings in the CRDsValidation map of validations_generated.go, and write them to OUTDIR as
//	    virtualmachines.kubevirt.io.yaml and virtualmachineinstances.kubevirt.io.yaml.
//
// Output is YAML from sigs.k8s.io/yaml (map keys sorted, so deterministic) without a header comment; crds.sh adds
// that.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const invalidAnnotation = "feature-gate.release.openshift.io/"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "crdgen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 3 && args[0] == "strip-annotation" {
		return stripAnnotation(args[1], args[2])
	}
	if len(args) == 3 && args[0] == "kubevirt" {
		return kubevirt(args[1], args[2])
	}
	return fmt.Errorf("usage: crdgen strip-annotation IN OUT | crdgen kubevirt IN_VALIDATIONS_GO OUTDIR")
}

// useNumber keeps numbers as json.Number so that re-serialising never turns an integer into a float.
func useNumber(d *json.Decoder) *json.Decoder { d.UseNumber(); return d }

func stripAnnotation(in, out string) error {
	src, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var doc map[string]interface{}
	if err := yaml.Unmarshal(src, &doc, useNumber); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if doc["kind"] != "CustomResourceDefinition" {
		return fmt.Errorf("%s: kind is %v, want CustomResourceDefinition", in, doc["kind"])
	}
	meta, _ := doc["metadata"].(map[string]interface{})
	annotations, _ := meta["annotations"].(map[string]interface{})
	if _, ok := annotations[invalidAnnotation]; !ok {
		return fmt.Errorf("%s: annotation %q not present; is the fix-up still needed?", in, invalidAnnotation)
	}
	delete(annotations, invalidAnnotation)
	if len(annotations) == 0 {
		delete(meta, "annotations")
	}
	// The result must still be a well-formed v1 CRD with no fields the type does not know.
	body, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	var crd extv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(body, &crd); err != nil {
		return fmt.Errorf("%s: not a strict apiextensions.k8s.io/v1 CRD after the fix-up: %w", in, err)
	}
	return os.WriteFile(out, body, 0o644)
}

// schemas returns the string literals of the composite literal assigned to the package-level variable name in
// the Go file path, keyed by their (string literal) keys.
func schemas(path, name string) (map[string]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var lit *ast.CompositeLit
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.VAR {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if id.Name == name && i < len(vs.Values) {
					lit, _ = vs.Values[i].(*ast.CompositeLit)
				}
			}
		}
	}
	if lit == nil {
		return nil, fmt.Errorf("%s: no composite literal assigned to var %s", path, name)
	}
	out := map[string]string{}
	for _, elt := range lit.Elts {
		kv, ok := elt.(*ast.KeyValueExpr)
		if !ok {
			return nil, fmt.Errorf("%s: %s: element of %s is not key: value", path, fset.Position(elt.Pos()), name)
		}
		k, err := stringValue(kv.Key)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: key: %w", path, fset.Position(kv.Pos()), err)
		}
		v, err := stringValue(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: value of %q: %w", path, fset.Position(kv.Value.Pos()), k, err)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s: duplicate key %q", path, k)
		}
		out[k] = v
	}
	return out, nil
}

// stringValue evaluates a string literal, or a "+" concatenation of them (how a generator would have to
// embed a backquote in a raw string).
func stringValue(e ast.Expr) (string, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", fmt.Errorf("not a string literal")
		}
		return strconv.Unquote(e.Value)
	case *ast.ParenExpr:
		return stringValue(e.X)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", fmt.Errorf("unsupported operator %s", e.Op)
		}
		x, err := stringValue(e.X)
		if err != nil {
			return "", err
		}
		y, err := stringValue(e.Y)
		return x + y, err
	}
	return "", fmt.Errorf("unsupported expression %T", e)
}

// crdFile is a CRD without its status: extv1.CustomResourceDefinition would always serialise an empty status,
// which has no place in a manifest.
type crdFile struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta                  `json:"metadata"`
	Spec            extv1.CustomResourceDefinitionSpec `json:"spec"`
}

const (
	kubevirtGroup             = "kubevirt.io"
	kubevirtAppLabel          = "kubevirt.io" // virtv1.AppLabel
	creationTimestampJSONPath = ".metadata.creationTimestamp"
	phaseJSONPath             = ".status.phase"
	readyJSONPath             = ".status.conditions[?(@.type=='Ready')].status"
)

// kubevirtCRDs mirrors NewVirtualMachineCrd and NewVirtualMachineInstanceCrd in virt-operator's crds.go, with
// only the v1 version (served, storage) of virtv1.ApiSupportedVersions: the deprecated v1alpha3 is left out.
// The VirtualMachineInstance printer columns are the five shown by default; upstream's two priority-1 columns
// (Live-Migratable, Paused) are left out.
func kubevirtCRDs() []crdFile {
	vm := crdFile{
		Metadata: metav1.ObjectMeta{Name: "virtualmachines." + kubevirtGroup},
		Spec: extv1.CustomResourceDefinitionSpec{
			Group: kubevirtGroup,
			Scope: extv1.NamespaceScoped,
			Names: extv1.CustomResourceDefinitionNames{
				Plural:     "virtualmachines",
				Singular:   "virtualmachine",
				Kind:       "VirtualMachine",
				ShortNames: []string{"vm", "vms"},
				Categories: []string{"all"},
			},
			Versions: []extv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				AdditionalPrinterColumns: []extv1.CustomResourceColumnDefinition{
					{Name: "Age", Type: "date", JSONPath: creationTimestampJSONPath},
					{Name: "Status", Description: "Human Readable Status", Type: "string", JSONPath: ".status.printableStatus"},
					{Name: "Ready", Type: "string", JSONPath: readyJSONPath},
				},
				Subresources: &extv1.CustomResourceSubresources{Status: &extv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
	vmi := crdFile{
		Metadata: metav1.ObjectMeta{Name: "virtualmachineinstances." + kubevirtGroup},
		Spec: extv1.CustomResourceDefinitionSpec{
			Group: kubevirtGroup,
			Scope: extv1.NamespaceScoped,
			Names: extv1.CustomResourceDefinitionNames{
				Plural:     "virtualmachineinstances",
				Singular:   "virtualmachineinstance",
				Kind:       "VirtualMachineInstance",
				ShortNames: []string{"vmi", "vmis"},
				Categories: []string{"all"},
			},
			Versions: []extv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				AdditionalPrinterColumns: []extv1.CustomResourceColumnDefinition{
					{Name: "Age", Type: "date", JSONPath: creationTimestampJSONPath},
					{Name: "Phase", Type: "string", JSONPath: phaseJSONPath},
					{Name: "IP", Type: "string", JSONPath: ".status.interfaces[0].ipAddress"},
					{Name: "NodeName", Type: "string", JSONPath: ".status.nodeName"},
					{Name: "Ready", Type: "string", JSONPath: readyJSONPath},
				},
			}},
		},
	}
	crds := []crdFile{vm, vmi}
	for i := range crds {
		crds[i].TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
		crds[i].Metadata.Labels = map[string]string{kubevirtAppLabel: ""}
	}
	return crds
}

func kubevirt(validationsGo, outDir string) error {
	all, err := schemas(validationsGo, "CRDsValidation")
	if err != nil {
		return err
	}
	for _, crd := range kubevirtCRDs() {
		// crds.go's patchValidation: the map is keyed by the singular name, and each value is the YAML of a
		// CustomResourceValidation ("openAPIV3Schema: ...") decoded with k8s.io/apimachinery/pkg/util/yaml.
		key := crd.Spec.Names.Singular
		src, ok := all[key]
		if !ok {
			return fmt.Errorf("%s: CRDsValidation has no %q", validationsGo, key)
		}
		var validation extv1.CustomResourceValidation
		if err := k8syaml.NewYAMLToJSONDecoder(bytes.NewReader([]byte(src))).Decode(&validation); err != nil {
			return fmt.Errorf("%s: CRDsValidation[%q]: %w", validationsGo, key, err)
		}
		if validation.OpenAPIV3Schema == nil {
			return fmt.Errorf("%s: CRDsValidation[%q] has no openAPIV3Schema", validationsGo, key)
		}
		// Fail on any field the v1 schema type would silently drop.
		if err := yaml.UnmarshalStrict([]byte(src), &extv1.CustomResourceValidation{}); err != nil {
			return fmt.Errorf("%s: CRDsValidation[%q]: %w", validationsGo, key, err)
		}
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Schema = &validation
		}
		body, err := yaml.Marshal(crd)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(outDir, crd.Metadata.Name+".yaml"), body, 0o644); err != nil {
			return err
		}
	}
	return nil
}
