package inject_test

import (
	"bytes"
	"crypto/x509"
	"maps"
	"testing"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/pki"
)

var testPolicy = inject.CertPolicy{CAValidity: 300 * 24 * time.Hour, CertValidity: 30 * 24 * time.Hour}

func step(t *testing.T, data map[string][]byte, now time.Time, want inject.CertAction) map[string][]byte {
	t.Helper()
	plan := inject.PlanCerts(data, now, testPolicy)
	if plan.Action != want {
		t.Fatalf("at %s: plan %s (%s), want %s", now.Format(time.DateOnly), plan.Action, plan.Reason, want)
	}
	out, err := inject.ExecuteCerts(data, plan, "clusters-demo", now, testPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if got := inject.PlanCerts(out, now, testPolicy); got.Action != inject.CertsCurrent {
		t.Fatalf("after %s: plan %s (%s), want current", want, got.Action, got.Reason)
	}
	return out
}

// verifies reports whether a client that trusts bundle accepts the serving chain of data at now for 127.0.0.1,
// the way crypto/tls verifies a server (leaf plus the intermediates the server sends).
func verifies(t *testing.T, bundle []byte, data map[string][]byte, now time.Time) bool {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatal("no CA in bundle")
	}
	chain, err := pki.ParseCertificates(data[inject.CertKey])
	if err != nil {
		t.Fatal(err)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err = chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now, DNSName: "127.0.0.1"})
	return err == nil
}

// The life of one namespace's Secret: created, serving certificate renewed, CA rotated, previous CA pruned. A
// client that loaded ca.crt at creation keeps verifying until the first CA expires, thanks to the cross-signed
// successor; one that loaded it after the rotation verifies throughout.
func TestCertLifecycle(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	data := step(t, nil, t0, inject.CertsCreate)
	firstBundle := data[inject.CABundleKey]
	if !verifies(t, firstBundle, data, t0) {
		t.Fatal("a fresh Secret does not verify")
	}
	next := inject.PlanCerts(data, t0, testPolicy).Next
	if want := t0.Add(20 * 24 * time.Hour); next.Before(want.Add(-2*time.Hour)) || next.After(want) {
		t.Fatalf("next check %s, want the serving certificate's renewal around %s", next, want)
	}

	t1 := t0.Add(21 * 24 * time.Hour)
	data = step(t, data, t1, inject.CertsRenew)
	if string(data[inject.CABundleKey]) != string(firstBundle) || !verifies(t, firstBundle, data, t1) {
		t.Fatal("renewing the serving certificate changed the CA")
	}

	t2 := t0.Add(201 * 24 * time.Hour) // past two thirds of the CA's 300 days
	for now := t1; now.Before(t2); now = now.Add(24 * time.Hour) {
		if p := inject.PlanCerts(data, now, testPolicy); p.Action == inject.CertsRenew {
			data = step(t, data, now, inject.CertsRenew)
		}
	}
	data = step(t, data, t2, inject.CertsRotateCA)
	rotated := data[inject.CABundleKey]
	bundle, _ := pki.ParseCertificates(rotated)
	if len(bundle) != 2 {
		t.Fatalf("bundle after rotation has %d CAs, want the successor and the old one", len(bundle))
	}
	successor := pki.EncodeCert(bundle[0].Raw)
	if !verifies(t, firstBundle, data, t2) || !verifies(t, rotated, data, t2) || !verifies(t, successor, data, t2) {
		t.Fatal("after the CA rotation, a client of the old bundle, the new bundle or the successor alone cannot verify")
	}
	t3 := t2.Add(21 * 24 * time.Hour)
	data = step(t, data, t3, inject.CertsRenew)
	if !verifies(t, firstBundle, data, t3) {
		t.Fatal("a renewal after the rotation dropped the cross-signed intermediate while the old CA lives")
	}
	t4 := t0.Add(300*24*time.Hour + time.Hour) // the first CA has expired
	for now := t3; now.Before(t0.Add(299 * 24 * time.Hour)); now = now.Add(24 * time.Hour) {
		if p := inject.PlanCerts(data, now, testPolicy); p.Action != inject.CertsCurrent {
			data = step(t, data, now, p.Action)
		}
	}
	data = step(t, data, t4, inject.CertsPrune)
	if bundle, _ := pki.ParseCertificates(data[inject.CABundleKey]); len(bundle) != 1 {
		t.Fatalf("bundle after the old CA expired has %d CAs", len(bundle))
	}
	if chain, _ := pki.ParseCertificates(data[inject.CertKey]); len(chain) != 1 || !verifies(t, data[inject.CABundleKey], data, t4) {
		t.Fatal("after pruning, the chain still carries the intermediate or does not verify")
	}
}

func TestPlanCertsRepairs(t *testing.T) {
	now := time.Now()
	good, err := inject.ExecuteCerts(nil, inject.CertPlan{Action: inject.CertsCreate}, "ns", now, testPolicy)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := inject.ExecuteCerts(nil, inject.CertPlan{Action: inject.CertsCreate}, "other", now, testPolicy)
	with := func(k string, v []byte) map[string][]byte {
		d := map[string][]byte{}
		for kk, vv := range good {
			d[kk] = vv
		}
		d[k] = v
		return d
	}
	for name, tc := range map[string]struct {
		data map[string][]byte
		want inject.CertAction
	}{
		"missing":              {nil, inject.CertsCreate},
		"garbage CA key":       {with(inject.CAKeyKey, []byte("x")), inject.CertsCreate},
		"CA key of another CA": {with(inject.CAKeyKey, other[inject.CAKeyKey]), inject.CertsCreate},
		"mismatched tls key":   {with(inject.KeyKey, other[inject.KeyKey]), inject.CertsCreate},
		"cert of another CA": {func() map[string][]byte {
			d := with(inject.CertKey, other[inject.CertKey])
			d[inject.KeyKey] = other[inject.KeyKey]
			return d
		}(), inject.CertsRenew},
		"expired CA": {good, inject.CertsCreate},
	} {
		t.Run(name, func(t *testing.T) {
			at := now
			if name == "expired CA" {
				at = now.Add(testPolicy.CAValidity + time.Hour)
			}
			if got := inject.PlanCerts(tc.data, at, testPolicy); got.Action != tc.want {
				t.Fatalf("plan %s (%s), want %s", got.Action, got.Reason, tc.want)
			}
		})
	}
	// A serving certificate issued by a clock ahead of this one is not valid yet for its clients: renewed.
	ahead, err := inject.ExecuteCerts(good, inject.CertPlan{Action: inject.CertsRenew}, "ns", now.Add(21*24*time.Hour), testPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if got := inject.PlanCerts(ahead, now, testPolicy); got.Action != inject.CertsRenew {
		t.Errorf("a serving certificate not valid yet: plan %s (%s), want %s", got.Action, got.Reason, inject.CertsRenew)
	}
}

// The kept Secret is the one truth; with none kept, only a namespace Secret that still holds its CA key is adopted;
// the namespace's Secret is everything kept but the CA key.
func TestKeptDataAndProjection(t *testing.T) {
	full := map[string][]byte{inject.CABundleKey: []byte("ca"), inject.CAKeyKey: []byte("key"), inject.CertKey: []byte("crt"), inject.KeyKey: []byte("k")}
	public := map[string][]byte{inject.CABundleKey: []byte("ca"), inject.CertKey: []byte("crt"), inject.KeyKey: []byte("k")}
	other := map[string][]byte{inject.CABundleKey: []byte("other"), inject.CAKeyKey: []byte("other-key")}
	for _, c := range []struct {
		name        string
		kept        map[string][]byte
		keptExists  bool
		namespaced  map[string][]byte
		want        map[string][]byte
		wantAdopted bool
	}{
		{"kept wins over a namespace Secret with a key", full, true, other, full, false},
		{"kept wins over a projection", full, true, public, full, false},
		{"none kept: a Secret with its key is adopted", nil, false, full, full, true},
		{"none kept: a projection is not enough", nil, false, public, nil, false},
		{"none kept, no Secret", nil, false, nil, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, adopted := inject.KeptData(c.kept, c.keptExists, c.namespaced)
			if !maps.EqualFunc(got, c.want, bytes.Equal) || adopted != c.wantAdopted {
				t.Errorf("KeptData = %v, %v; want %v, %v", got, adopted, c.want, c.wantAdopted)
			}
		})
	}
	if got := inject.Projection(full); !maps.EqualFunc(got, public, bytes.Equal) {
		t.Errorf("Projection = %v, want %v", got, public)
	}
	if _, ok := full[inject.CAKeyKey]; !ok {
		t.Error("Projection changed the kept data")
	}
}

// KeptFor reads back the namespace CAKeySecret named, and nothing else.
func TestKeptFor(t *testing.T) {
	if ns, ok := inject.KeptFor(inject.CAKeySecret("clusters-a")); !ok || ns != "clusters-a" {
		t.Errorf("KeptFor(CAKeySecret(clusters-a)) = %q, %v", ns, ok)
	}
	for _, name := range []string{inject.LoopbackSecret, inject.LoopbackSecret + "-ca.", "webhook-serving-cert", "x" + inject.CAKeySecret("a")} {
		if ns, ok := inject.KeptFor(name); ok {
			t.Errorf("KeptFor(%q) = %q, want none", name, ns)
		}
	}
}
