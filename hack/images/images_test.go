package images

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

var root = filepath.Join("..", "..")

// stage is one image stage of the Dockerfile.
type stage struct {
	from, name string
	lines      []string
}

func dockerfile(t *testing.T) (build string, stages []stage) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Join continued lines, drop comments.
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	var cur *stage
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if f := strings.Fields(line); f[0] == "FROM" {
			stages = append(stages, stage{from: f[len(f)-3], name: f[len(f)-1]})
			cur = &stages[len(stages)-1]
			continue
		}
		if cur != nil {
			cur.lines = append(cur.lines, line)
		}
	}
	if len(stages) == 0 || stages[0].name != "build" {
		t.Fatalf("the Dockerfile's first stage is not \"build\": %+v", stages)
	}
	for _, l := range stages[0].lines {
		if strings.Contains(l, "go build") {
			build = l
		}
	}
	return build, stages[1:]
}

// TestDockerfileAgrees: the Dockerfile, for those who build with Docker,
// makes the images this package defines: the same go build (flags, stamps,
// packages, static), and each image FROM scratch with rootfs/ and the
// binary at the same path, the same user, environment, entrypoint and
// arguments, the operator's last (the default target).
func TestDockerfileAgrees(t *testing.T) {
	build, stages := dockerfile(t)
	if !strings.Contains(build, "CGO_ENABLED=0") {
		t.Errorf("the build stage does not build static binaries (CGO_ENABLED=0): %s", build)
	}
	var pkgs []string
	for _, i := range All {
		pkgs = append(pkgs, i.Package)
	}
	// The same arguments, with the Dockerfile's build arguments as stamps
	// and its $pkg for the version package.
	want := GoBuildArgs(Stamps{Version: "${VERSION}", Commit: "${COMMIT}", Date: "${DATE}"}, "/out/")
	wantLine := strings.ReplaceAll("go "+strings.Join(want, " "), "code.tuna.am/tuna/k8s-operator/internal/version", "$pkg")
	wantLine = strings.Replace(wantLine, "-ldflags=", `-ldflags="`, 1)
	wantLine = strings.Replace(wantLine, " -o /out/", `" -o /out/`, 1)
	if !strings.Contains(build, wantLine) {
		t.Errorf("the Dockerfile's go build differs from GoBuildArgs:\n got: %s\nwant: %s ...", build, wantLine)
	}
	if !strings.Contains(build, "pkg=code.tuna.am/tuna/k8s-operator/internal/version") {
		t.Errorf("the build stage does not set $pkg to the version package: %s", build)
	}
	got := regexp.MustCompile(`\./[a-z0-9/-]+`).FindAllString(build[strings.Index(build, "-o /out/"):], -1)
	sort.Strings(got)
	sort.Strings(pkgs)
	if !slices.Equal(got, pkgs) {
		t.Errorf("the Dockerfile builds %v, the images need %v", got, pkgs)
	}

	if len(stages) != len(All) {
		t.Fatalf("%d image stages, want %d (%v)", len(stages), len(All), All)
	}
	for n, i := range All {
		st := stages[n]
		if st.name != i.Name || st.from != "scratch" {
			t.Errorf("stage %d is %s FROM %s, want %s FROM scratch", n, st.name, st.from, i.Name)
			continue
		}
		cmd, _ := json.Marshal(i.Cmd)
		entry, _ := json.Marshal(i.Entrypoint())
		wantLines := []string{
			"COPY " + RootFS + "/ /",
			"COPY --from=build /out/" + i.Name + " " + i.Binary(),
			"ENV PATH=" + BinDir,
			"USER " + User,
			"ENTRYPOINT " + string(entry),
		}
		if len(i.Cmd) > 0 {
			wantLines = append(wantLines, "CMD "+string(cmd))
		}
		if !slices.Equal(st.lines, wantLines) {
			t.Errorf("stage %s:\n%s\nwant:\n%s", i.Name, strings.Join(st.lines, "\n"), strings.Join(wantLines, "\n"))
		}
	}
}

// TestImages builds the three images for the host as the release does and
// reads them back: FROM scratch (one layer: rootfs/ and the binary, owned
// by root, nothing else), static binaries, user 65532, the entrypoint,
// arguments and labels; a second build of the same commit gives the same
// digests, and the tarball the node suite imports holds them under their
// names.
func TestImages(t *testing.T) {
	ctx := context.Background()
	stamps := Stamps{Version: "v9.9.9-test", Commit: "0123456789abcdef0123456789abcdef01234567", Date: "2026-01-02T03:04:05Z", Source: "https://example.test/repo"}
	first, err := Build(ctx, root, HostPlatform(), stamps, All...)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Build(ctx, root, HostPlatform(), stamps, All...)
	if err != nil {
		t.Fatal(err)
	}
	refs := map[name.Tag]v1.Image{}
	for _, i := range All {
		img := first[i.Name]
		checkImage(t, i, img, stamps)
		d1, _ := img.Digest()
		d2, _ := again[i.Name].Digest()
		if d1 != d2 {
			t.Errorf("%s: two builds of one commit differ: %s and %s", i.Name, d1, d2)
		}
		ref, err := name.NewTag("code.tuna.am/tuna/" + i.Name + ":test")
		if err != nil {
			t.Fatal(err)
		}
		refs[ref] = img
	}

	file := filepath.Join(t.TempDir(), "images.tar")
	if err := WriteTarball(file, refs); err != nil {
		t.Fatal(err)
	}
	for ref, img := range refs {
		back, err := tarball.ImageFromPath(file, &ref)
		if err != nil {
			t.Fatalf("%s not in the tarball: %v", ref, err)
		}
		want, _ := img.ConfigName()
		got, _ := back.ConfigName()
		if got != want {
			t.Errorf("%s: config %s in the tarball, want %s", ref, got, want)
		}
	}
}

func checkImage(t *testing.T, i Image, img v1.Image, s Stamps) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/" + i.Name}) || !slices.Equal(c.Cmd, i.Cmd) {
		t.Errorf("%s: user %q, entrypoint %q, cmd %q", i.Name, c.User, c.Entrypoint, c.Cmd)
	}
	if cf.OS != "linux" || cf.Architecture != HostPlatform().Architecture || cf.Created.UTC().Format("2006-01-02T15:04:05Z") != s.Date {
		t.Errorf("%s: %s/%s created %v", i.Name, cf.OS, cf.Architecture, cf.Created)
	}
	if c.Labels["org.opencontainers.image.revision"] != s.Commit || c.Labels["org.opencontainers.image.version"] != s.Version ||
		c.Labels["org.opencontainers.image.source"] != s.Source {
		t.Errorf("%s: labels %v", i.Name, c.Labels)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s: %d layers (%v), want 1: FROM scratch", i.Name, len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	var bin []byte
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: %s owned by %d:%d, want root (the user may not change its own binary)", i.Name, h.Name, h.Uid, h.Gid)
		}
		if h.Name == "usr/local/bin/"+i.Name {
			bin, _ = io.ReadAll(tr)
		}
		if h.Name == "etc/passwd" {
			p, _ := io.ReadAll(tr)
			if !strings.Contains(string(p), "nonroot:x:65532:65532:") {
				t.Errorf("%s: /etc/passwd does not name 65532 nonroot:\n%s", i.Name, p)
			}
		}
	}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	want := []string{"etc/", "etc/group", "etc/passwd", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/" + i.Name}
	if !slices.Equal(names, want) {
		t.Errorf("%s holds %v, want %v", i.Name, names, want)
	}
	if h := files["usr/local/bin/"+i.Name]; h == nil || h.Mode&0o777 != 0o755 {
		t.Fatalf("%s: the binary is missing or not 0755", i.Name)
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("%s: the binary is no ELF file: %v", i.Name, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: the binary is dynamically linked (PT_INTERP): it cannot run FROM scratch", i.Name)
		}
	}
}

// TestPush pushes the images as the release workflow does, to a real
// registry on loopback (go-containerregistry's, in memory), and pulls
// them back: an index per image whose one platform holds the image built
// here, under the tag, with the labels.
func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	stamps := Stamps{Version: "v9.9.9-test", Commit: "0123456789abcdef0123456789abcdef01234567", Date: "2026-01-02T03:04:05Z"}
	ctx := context.Background()
	if err := Push(ctx, root, host+"/tuna", "9.9.9-test", []v1.Platform{HostPlatform()}, stamps); err != nil {
		t.Fatal(err)
	}
	want, err := Build(ctx, root, HostPlatform(), stamps, All...)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range All {
		ref, err := name.NewTag(host + "/tuna/" + i.Name + ":9.9.9-test")
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Manifests) != 1 || m.Manifests[0].Platform == nil || m.Manifests[0].Platform.Architecture != HostPlatform().Architecture {
			t.Fatalf("%s: index %+v, want one manifest for %s", ref, m.Manifests, HostPlatform().Architecture)
		}
		wantDigest, _ := want[i.Name].Digest()
		if m.Manifests[0].Digest != wantDigest {
			t.Errorf("%s: pushed %s, a build of the same commit is %s", ref, m.Manifests[0].Digest, wantDigest)
		}
	}
}
