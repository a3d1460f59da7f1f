package localhub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// Base is what a hub holds when it starts. Build writes it once into an empty hub; the etcd data that hub leaves
// is kept in the user's cache, named by the hub's binaries and Key, and every later Start with the same Key starts
// etcd from a copy of it. kube-apiserver then serves what etcd holds as soon as it is ready, at about half the CPU
// that creating the same CRDs costs it (it builds each CRD's handlers either way, but validates and stores none).
//
// A base holds only what every hub of its kind starts with and nothing a test decides (no ports, certificates or
// tokens: those differ on every start). Each Start gets its own copy, so a test may change or delete anything.
type Base struct {
	// Key names what Build writes, for example a hash of the manifests it applies. A new Key builds a new base.
	Key string
	// Build writes the base into a running, empty hub; ctx bounds it.
	Build func(ctx context.Context, cfg *rest.Config) error
}

// baseBuildTimeout bounds one Build, the hub's start and stop included.
const baseBuildTimeout = 5 * time.Minute

// baseUnusedFor is how long a base nothing started from stays in the cache.
const baseUnusedFor = 14 * 24 * time.Hour

// baseRoot is where bases are kept: beside the hub binaries' cache.
func baseRoot() string {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache")
		} else {
			cache = os.TempDir()
		}
	}
	return filepath.Join(cache, "acm-cluster-sp", "hub-base")
}

// baseName names a base by the binaries that wrote it (their path and, for a rebuild in place, their size and time)
// and its Key.
func baseName(bin, key string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", KubernetesVersion, EtcdVersion, bin)
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if fi, err := os.Stat(filepath.Join(bin, b)); err == nil {
			fmt.Fprintf(h, "%s %d %d\x00", b, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	h.Write([]byte(key))
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// baseData returns a fresh copy of base's etcd data for one hub (the caller removes it), building the base first when
// the cache has none. Concurrent starts (test packages run in parallel) build it once: the first holds a file lock
// while the others wait for it.
func baseData(bin string, base *Base) (string, error) {
	root := baseRoot()
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	dir := filepath.Join(root, baseName(bin, base.Key))
	if err := ensureBase(bin, dir, base); err != nil {
		return "", fmt.Errorf("hub base %s: %w", dir, err)
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(dir, "complete"), now, now) // in use: not pruned
	data, err := os.MkdirTemp("", etcdDirPrefix)
	if err != nil {
		return "", err
	}
	if err := copyTree(filepath.Join(dir, "etcd"), data); err != nil {
		_ = os.RemoveAll(data)
		return "", fmt.Errorf("copying hub base %s: %w", dir, err)
	}
	return data, nil
}

func ensureBase(bin, dir string, base *Base) error {
	complete := filepath.Join(dir, "complete")
	if _, err := os.Stat(complete); err == nil {
		return nil
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = lock.Close() }() // releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	if _, err := os.Stat(complete); err == nil {
		return nil // built while this start waited for the lock
	}
	if err := os.RemoveAll(dir); err != nil { // a build that died half-way
		return err
	}
	building := dir + ".building"
	if err := os.RemoveAll(building); err != nil {
		return err
	}
	if err := buildBase(bin, building, base); err != nil {
		_ = os.RemoveAll(building)
		return err
	}
	// Kept as a sparse copy: etcd's preallocated log is 64 MiB of mostly zeros.
	if err := os.MkdirAll(filepath.Join(dir, "etcd"), 0o700); err != nil {
		return err
	}
	if err := copyTree(building, filepath.Join(dir, "etcd")); err != nil {
		return err
	}
	if err := os.RemoveAll(building); err != nil {
		return err
	}
	if err := os.WriteFile(complete, []byte(base.Key+"\n"), 0o600); err != nil {
		return err
	}
	pruneBases(filepath.Dir(dir))
	return nil
}

// buildBase starts an empty hub on data, runs Build and stops the hub (etcd stops cleanly, so its data is whole).
func buildBase(bin, data string, base *Base) (err error) {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	h, err := start(Options{BinDir: bin}, data)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, h.Stop()) }()
	ctx, cancel := context.WithTimeout(context.Background(), baseBuildTimeout)
	defer cancel()
	return base.Build(ctx, h.Config)
}

// pruneBases removes the bases nothing started from for baseUnusedFor.
func pruneBases(root string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		fi, err := os.Stat(filepath.Join(root, e.Name(), "complete"))
		if err == nil && time.Since(fi.ModTime()) > baseUnusedFor {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
			_ = os.Remove(filepath.Join(root, e.Name()+".lock"))
		}
	}
}

// copyTree copies the directory src to dst (which exists), keeping file modes. Runs of zeros become holes: etcd
// preallocates its write-ahead log in 64 MiB files, mostly zeros, and a hub's copy need not write them.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel == "." {
				return os.Chmod(dst, info.Mode().Perm())
			}
			return os.Mkdir(target, info.Mode().Perm())
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%s: not a regular file", path)
		}
		return copySparse(path, target, info)
	})
}

func copySparse(src, dst string, info fs.FileInfo) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, info.Mode().Perm())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	buf := make([]byte, 64<<10)
	zeros := make([]byte, len(buf))
	for {
		n, rerr := io.ReadFull(in, buf)
		if n > 0 {
			if bytes.Equal(buf[:n], zeros[:n]) {
				if _, err := out.Seek(int64(n), io.SeekCurrent); err != nil {
					return err
				}
			} else if _, err := out.Write(buf[:n]); err != nil {
				return err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	return out.Truncate(info.Size())
}
