// Command tuna-images builds the product's images (package images) without
// Docker: `save` writes them for the host's platform into a tarball that
// `ctr images import` and `docker load` read; `push` builds every platform
// and pushes a multi-platform index of each image to a registry (the release
// workflow), with the credentials of ~/.docker/config.json.
//
//	go run ./hack/images/cmd/tuna-images save -o images.tar --tag dev
//	go run ./hack/images/cmd/tuna-images push --registry code.tuna.am/tuna --tag 1.2.3 \
//	  --version v1.2.3 --commit "$(git rev-parse HEAD)" --date 2026-01-02T03:04:05Z
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"code.tuna.am/tuna/k8s-operator/hack/images"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch os.Args[1] {
	case "save":
		err = save(ctx, os.Args[2:])
	case "push":
		err = push(ctx, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tuna-images:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: tuna-images save -o FILE [flags] | push --registry HOST/PATH --tag TAG [flags]")
	os.Exit(2)
}

type common struct {
	registry, tag string
	stamps        images.Stamps
}

// newFlags is a subcommand's flag set with the flags both share.
func newFlags(name string) (*flag.FlagSet, *common) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	c := &common{}
	c.flags(fs)
	return fs, c
}

func (c *common) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.registry, "registry", "code.tuna.am/tuna", "the images' names are REGISTRY/<image>")
	fs.StringVar(&c.tag, "tag", "dev", "the images' tag")
	fs.StringVar(&c.stamps.Version, "version", "", "the binaries' version stamp, e.g. v1.2.3 (default dev)")
	fs.StringVar(&c.stamps.Commit, "commit", "", "the git commit stamped into the binaries and labels")
	fs.StringVar(&c.stamps.Date, "date", "", "the commit's date (RFC 3339, UTC): the binaries' date stamp and the images' creation time")
	fs.StringVar(&c.stamps.Source, "source", "", "the repository URL of the org.opencontainers.image.source label")
}

func (c *common) ref(i images.Image) (name.Tag, error) {
	return name.NewTag(c.registry + "/" + i.Name + ":" + c.tag)
}

func save(ctx context.Context, args []string) error {
	fs, c := newFlags("save")
	out := fs.String("o", "", "the tarball to write (required)")
	_ = fs.Parse(args)
	if *out == "" {
		return fmt.Errorf("save: -o FILE is required")
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	built, err := images.Build(ctx, root, images.HostPlatform(), c.stamps, images.All...)
	if err != nil {
		return err
	}
	refs := map[name.Tag]v1.Image{}
	for _, i := range images.All {
		ref, err := c.ref(i)
		if err != nil {
			return err
		}
		refs[ref] = built[i.Name]
	}
	return images.WriteTarball(*out, refs)
}

func push(ctx context.Context, args []string) error {
	fs, c := newFlags("push")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	_ = fs.Parse(args)
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	var ps []v1.Platform
	for _, p := range strings.Split(*platforms, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok {
			return fmt.Errorf("push: platform %q is not os/arch", p)
		}
		ps = append(ps, v1.Platform{OS: os, Architecture: arch})
	}
	fmt.Fprintf(os.Stderr, "tuna-images: building and pushing %s/{%s}:%s (%s)\n", c.registry, names(), c.tag, *platforms)
	return images.Push(ctx, root, c.registry, c.tag, ps, c.stamps, remote.WithAuthFromKeychain(authn.DefaultKeychain))
}

func names() string {
	var n []string
	for _, i := range images.All {
		n = append(n, i.Name)
	}
	return strings.Join(n, ",")
}

// moduleRoot is the folder of go.mod, where `go run` runs from.
func moduleRoot() (string, error) {
	if _, err := os.Stat("go.mod"); err != nil {
		return "", fmt.Errorf("run tuna-images from the repository's root (no go.mod here)")
	}
	return os.Getwd()
}
