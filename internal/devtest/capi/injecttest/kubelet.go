package injecttest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Kubelet stands in for the kubelet where a client's view of its container is made: it resolves the container's
// environment and writes the files of its volume mounts under Root, as a kubelet would mount them. It knows
// nothing of the injector: it follows the admitted Pod's spec.
type Kubelet struct {
	// Client reads Secrets and ConfigMaps and requests service-account tokens (an admin).
	Client kubernetes.Interface
	// ServiceHost and ServicePort are what the kubelet advertises for the "kubernetes" Service
	// (KUBERNETES_SERVICE_HOST/PORT): the hub's address.
	ServiceHost, ServicePort string
	// Root receives one directory per container.
	Root string
}

// ContainerView is what one container sees: its environment and its mounted files.
type ContainerView struct {
	Env    map[string]string
	root   string
	mounts map[string]string // mount path → local directory
}

// Path is the local file behind an absolute path inside the container ("" if no mount covers it).
func (v *ContainerView) Path(p string) string {
	best := ""
	for mp := range v.mounts {
		if (p == mp || strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > len(best) {
			best = mp
		}
	}
	if best == "" {
		return ""
	}
	return filepath.Join(v.mounts[best], strings.TrimPrefix(p, best))
}

// InClusterConfig builds the rest.Config exactly as client-go's rest.InClusterConfig does inside the container:
// https://KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT, the token file and ca.crt of the service-account path.
func (v *ContainerView) InClusterConfig() (*rest.Config, error) {
	const dir = "/var/run/secrets/kubernetes.io/serviceaccount"
	host, port := v.Env["KUBERNETES_SERVICE_HOST"], v.Env["KUBERNETES_SERVICE_PORT"]
	if host == "" || port == "" {
		return nil, rest.ErrNotInCluster
	}
	tokenFile, caFile := v.Path(dir+"/token"), v.Path(dir+"/ca.crt")
	if tokenFile == "" {
		return nil, fmt.Errorf("nothing mounted at %s", dir)
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            "https://" + net.JoinHostPort(host, port),
		TLSClientConfig: rest.TLSClientConfig{CAFile: caFile},
		BearerToken:     string(token), BearerTokenFile: tokenFile,
	}, nil
}

// Container materializes container name of the admitted pod (init containers included). Called again, it
// refreshes the files, as the kubelet does when a Secret or ConfigMap changes.
func (k *Kubelet) Container(ctx context.Context, pod *corev1.Pod, name string) (*ContainerView, error) {
	all := append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)
	i := slices.IndexFunc(all, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("pod %s has no container %s", pod.Name, name)
	}
	ct := all[i]
	v := &ContainerView{Env: k.env(pod, ct), root: filepath.Join(k.Root, pod.Namespace, pod.Name, name), mounts: map[string]string{}}
	for _, m := range ct.VolumeMounts {
		j := slices.IndexFunc(pod.Spec.Volumes, func(vol corev1.Volume) bool { return vol.Name == m.Name })
		if j < 0 {
			return nil, fmt.Errorf("container %s mounts unknown volume %s", name, m.Name)
		}
		dir := filepath.Join(v.root, m.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if err := k.materialize(ctx, pod, pod.Spec.Volumes[j], dir); err != nil {
			return nil, fmt.Errorf("volume %s: %w", m.Name, err)
		}
		v.mounts[m.MountPath] = dir
	}
	return v, nil
}

// env is the kubelet's service variables, then the container's own (which win); valueFrom fieldRefs of the Pod's
// name and namespace are resolved, other sources are left out.
func (k *Kubelet) env(pod *corev1.Pod, ct corev1.Container) map[string]string {
	env := map[string]string{
		"KUBERNETES_SERVICE_HOST": k.ServiceHost, "KUBERNETES_SERVICE_PORT": k.ServicePort, "KUBERNETES_SERVICE_PORT_HTTPS": k.ServicePort,
	}
	for _, e := range ct.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = pod.Namespace
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = pod.Name
		}
	}
	return env
}

func (k *Kubelet) materialize(ctx context.Context, pod *corev1.Pod, vol corev1.Volume, dir string) error {
	switch {
	case vol.Projected != nil:
		for _, src := range vol.Projected.Sources {
			if err := k.projection(ctx, pod, src, dir); err != nil {
				return err
			}
		}
		return nil
	case vol.Secret != nil:
		return k.secretFiles(ctx, pod.Namespace, vol.Secret.SecretName, vol.Secret.Items, dir)
	case vol.ConfigMap != nil:
		return k.configMapFiles(ctx, pod.Namespace, vol.ConfigMap.Name, vol.ConfigMap.Items, dir)
	}
	return nil // emptyDir and others: an empty directory
}

func (k *Kubelet) projection(ctx context.Context, pod *corev1.Pod, src corev1.VolumeProjection, dir string) error {
	switch {
	case src.ServiceAccountToken != nil:
		return k.token(ctx, pod, src.ServiceAccountToken, dir)
	case src.Secret != nil:
		return k.secretFiles(ctx, pod.Namespace, src.Secret.Name, src.Secret.Items, dir)
	case src.ConfigMap != nil:
		return k.configMapFiles(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, dir)
	case src.DownwardAPI != nil:
		for _, it := range src.DownwardAPI.Items {
			if it.FieldRef != nil && it.FieldRef.FieldPath == "metadata.namespace" {
				if err := writeFile(dir, it.Path, []byte(pod.Namespace)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// token requests a token bound to the Pod, with the projection's audience and lifetime, as the kubelet does.
func (k *Kubelet) token(ctx context.Context, pod *corev1.Pod, p *corev1.ServiceAccountTokenProjection, dir string) error {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: p.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if p.Audience != "" {
		req.Spec.Audiences = []string{p.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := k.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for %s/%s: %w", pod.Namespace, sa, err)
	}
	return writeFile(dir, p.Path, []byte(tr.Status.Token))
}

func (k *Kubelet) secretFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, dir string) error {
	s, err := k.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return writeItems(dir, s.Data, items)
}

func (k *Kubelet) configMapFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, dir string) error {
	cm, err := k.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	data := map[string][]byte{}
	for key, v := range cm.Data {
		data[key] = []byte(v)
	}
	return writeItems(dir, data, items)
}

// writeItems writes the listed keys to their paths, or every key to its own name when none is listed.
func writeItems(dir string, data map[string][]byte, items []corev1.KeyToPath) error {
	if len(items) == 0 {
		for key := range data {
			items = append(items, corev1.KeyToPath{Key: key, Path: key})
		}
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("key %s missing", it.Key)
		}
		if err := writeFile(dir, it.Path, v); err != nil {
			return err
		}
	}
	return nil
}

// writeFile replaces dir/rel atomically (write aside, rename), as the kubelet updates a mounted volume.
func writeFile(dir, rel string, data []byte) error {
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	tmp := p + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
