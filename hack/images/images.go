// Package images is the one definition of the product's container images:
// tuna-k8s-operator (the chart's image), tuna-edge and tuna-operator (the
// CLI). Each is FROM scratch: one layer with the static binary in
// /usr/local/bin and the files of rootfs/ (an /etc/passwd and /etc/group
// that name user 65532 "nonroot", as distroless does), run as 65532:65532.
// The binaries carry their own CA roots (golang.org/x/crypto/x509roots/
// fallback), used only where the image has none.
//
// The release workflow pushes what this package builds (cmd/tuna-images
// push), the node suite imports the same images into containerd (Build,
// WriteTarball), and the Dockerfile, for those who build with Docker, is
// checked against this definition by images_test.go. No registry and no
// Docker engine are needed to build.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"code.tuna.am/tuna/k8s-operator/internal/version"
)

// Image is one of the product's images.
type Image struct {
	// Name is the image's name under the registry and its binary's name.
	Name string
	// Package is the Go package of the binary, relative to the module root.
	Package string
	// Cmd is the image's default arguments (Docker's CMD).
	Cmd []string
}

// The product's images. The operator's is the Dockerfile's default (last)
// target: the chart runs it as `controller` and `agent`.
var (
	Edge     = Image{Name: "tuna-edge", Package: "./edge/cmd/tuna-edge", Cmd: []string{"serve"}}
	CLI      = Image{Name: "tuna-operator", Package: "./cli/cmd/tuna-operator"}
	Operator = Image{Name: "tuna-k8s-operator", Package: "./operator/cmd/tuna-k8s-operator"}
	All      = []Image{Edge, CLI, Operator}
)

const (
	// BinDir is where each image holds its binary.
	BinDir = "/usr/local/bin"
	// User is the uid:gid every image runs as: distroless's "nonroot", the
	// chart's runAsUser and runAsGroup.
	User = "65532:65532"
	// RootFS is the folder, relative to the module root, whose files every
	// image holds besides its binary (the Dockerfile copies it too).
	RootFS = "hack/images/rootfs"
)

//go:embed rootfs
var rootfs embed.FS

// Binary is the path of the image's binary inside it.
func (i Image) Binary() string { return path.Join(BinDir, i.Name) }

// Entrypoint is the image's ENTRYPOINT.
func (i Image) Entrypoint() []string { return []string{i.Binary()} }

// Stamps are the version stamps the binaries carry (internal/version) and
// the image labels that repeat them.
type Stamps struct {
	// Version is the release, such as v1.2.3 ("dev" when empty).
	Version string
	// Commit is the git commit, Date its commit date (RFC 3339, UTC): the
	// images' creation time, so that a rebuild of a release gives the same
	// image.
	Commit, Date string
	// Source is the repository URL for the org.opencontainers.image.source
	// label; "" leaves it out.
	Source string
}

// GoBuildArgs are the arguments of `go build` for the images' binaries:
// the Dockerfile's build stage runs the same (images_test.go checks it).
func GoBuildArgs(s Stamps, out string, pkgs ...string) []string {
	v := s.Version
	if v == "" {
		v = "dev"
	}
	args := []string{"build", "-trimpath", "-ldflags=-s -w " + version.LDFlags(v, s.Commit, s.Date), "-o", out}
	return append(args, pkgs...)
}

// BuildBinaries compiles the binaries of imgs for platform (os/arch) into
// dir, static (CGO_ENABLED=0), with root as the module root.
func BuildBinaries(ctx context.Context, root, dir string, platform v1.Platform, s Stamps, imgs ...Image) error {
	pkgs := make([]string, len(imgs))
	for n, i := range imgs {
		pkgs[n] = i.Package
	}
	cmd := exec.CommandContext(ctx, "go", GoBuildArgs(s, dir+string(filepath.Separator), pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+platform.OS, "GOARCH="+platform.Architecture)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v for %s/%s: %w\n%s", pkgs, platform.OS, platform.Architecture, err, out)
	}
	return nil
}

// Assemble makes the image of i from its binary, built for platform.
func Assemble(i Image, binary string, platform v1.Platform, s Stamps) (v1.Image, error) {
	created, err := creation(s)
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	layerTar, err := layer(i, bin, created)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer: l,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "tuna-images: " + i.Binary() + " and " + RootFS,
		},
		MediaType: types.OCILayer,
	})
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Variant = platform.Architecture, platform.OS, platform.Variant
	cf.Created = v1.Time{Time: created}
	cf.Config.User = User
	cf.Config.Entrypoint = i.Entrypoint()
	cf.Config.Cmd = i.Cmd
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=" + BinDir}
	cf.Config.Labels = Labels(s)
	return mutate.ConfigFile(img, cf)
}

// Labels are the OCI labels of every image.
func Labels(s Stamps) map[string]string {
	l := map[string]string{}
	if s.Version != "" {
		l["org.opencontainers.image.version"] = s.Version
	}
	if s.Commit != "" {
		l["org.opencontainers.image.revision"] = s.Commit
	}
	if s.Source != "" {
		l["org.opencontainers.image.source"] = s.Source
	}
	if len(l) == 0 {
		return nil
	}
	return l
}

func creation(s Stamps) (time.Time, error) {
	if s.Date == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s.Date)
	if err != nil {
		return time.Time{}, fmt.Errorf("the commit date %q is not RFC 3339: %w", s.Date, err)
	}
	return t.UTC(), nil
}

// layer is the image's one layer: the folders, rootfs/ and the binary, in
// a fixed order with fixed owners, modes and times, so the same binary
// gives the same digest.
func layer(i Image, bin []byte, created time.Time) ([]byte, error) {
	type entry struct {
		name string
		mode int64
		data []byte
		dir  bool
	}
	entries := []entry{}
	dirs := map[string]bool{}
	addDir := func(d string) {
		for p := d; p != "." && p != "/" && !dirs[p]; p = path.Dir(p) {
			dirs[p] = true
			entries = append(entries, entry{name: p + "/", mode: 0o755, dir: true})
		}
	}
	err := fs.WalkDir(rootfs, "rootfs", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := rootfs.ReadFile(p)
		if err != nil {
			return err
		}
		name := p[len("rootfs/"):]
		addDir(path.Dir(name))
		entries = append(entries, entry{name: name, mode: 0o644, data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	addDir(BinDir[1:])
	entries = append(entries, entry{name: i.Binary()[1:], mode: 0o755, data: bin})
	sort.SliceStable(entries, func(a, b int) bool { return entries[a].name < entries[b].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: created, Format: tar.FormatPAX, Uname: "root", Gname: "root"}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Build compiles and assembles imgs for platform; root is the module root.
func Build(ctx context.Context, root string, platform v1.Platform, s Stamps, imgs ...Image) (map[string]v1.Image, error) {
	dir, err := os.MkdirTemp("", "tuna-images-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := BuildBinaries(ctx, root, dir, platform, s, imgs...); err != nil {
		return nil, err
	}
	out := map[string]v1.Image{}
	for _, i := range imgs {
		img, err := Assemble(i, filepath.Join(dir, i.Name), platform, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", i.Name, err)
		}
		out[i.Name] = img
	}
	return out, nil
}

// HostPlatform is the platform this process runs on, which the node suite
// builds for.
func HostPlatform() v1.Platform {
	return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
}

// BuildIndexes builds every image for each platform and returns, by image
// name, the multi-platform index the release pushes.
func BuildIndexes(ctx context.Context, root string, platforms []v1.Platform, s Stamps) (map[string]v1.ImageIndex, error) {
	out := map[string]v1.ImageIndex{}
	for _, i := range All {
		out[i.Name] = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	}
	for _, p := range platforms {
		built, err := Build(ctx, root, p, s, All...)
		if err != nil {
			return nil, err
		}
		for _, i := range All {
			p := p
			out[i.Name] = mutate.AppendManifests(out[i.Name], mutate.IndexAddendum{
				Add:        built[i.Name],
				Descriptor: v1.Descriptor{Platform: &p},
			})
		}
	}
	return out, nil
}

// Push builds every image for platforms and pushes each as a
// multi-platform index to registry/<name>:tag (the release workflow's
// step), with opts for the credentials.
func Push(ctx context.Context, root, registry, tag string, platforms []v1.Platform, s Stamps, opts ...remote.Option) error {
	idx, err := BuildIndexes(ctx, root, platforms, s)
	if err != nil {
		return err
	}
	for _, i := range All {
		ref, err := name.NewTag(registry + "/" + i.Name + ":" + tag)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(ref, idx[i.Name], append([]remote.Option{remote.WithContext(ctx)}, opts...)...); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
	}
	return nil
}

// WriteTarball writes images under their names into one tarball (the
// format of `docker save`), which `ctr images import` and `docker load`
// read.
func WriteTarball(file string, refs map[name.Tag]v1.Image) error {
	m := make(map[name.Reference]v1.Image, len(refs))
	for ref, img := range refs {
		m[ref] = img
	}
	return tarball.MultiRefWriteToFile(file, m)
}
