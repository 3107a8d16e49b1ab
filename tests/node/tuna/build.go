// Package tuna puts the product on a node cluster (tests/node) the way a
// user does: the images built by hack/images and imported into the node,
// tuna-edge on the host as on a VPS, and the chart installed with the
// stock Helm 4 CLI (go tool helm, the pinned module) into a namespace that
// enforces the restricted Pod Security level.
package tuna

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"code.tuna.am/tuna/k8s-operator/hack/images"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/node"
)

// Registry is where the chart's default image.repository points; images
// are imported under it, so the chart needs only a tag.
const Registry = "code.tuna.am/tuna"

// Build is one build of the binaries and the images made of them.
type Build struct {
	// Tag is the images' tag.
	Tag string
	// Bin holds the static binaries the images hold: tuna-edge runs from
	// here on the host, tuna-operator (the CLI) too.
	Bin string
	// Tarball holds the three images under Registry/<name>:Tag.
	Tarball string
	// Images are the images by name.
	Images map[string]v1.Image
}

// BuildImages builds the binaries for the host (stamped with tag as their
// version) and the images of hack/images into dir.
func BuildImages(ctx context.Context, dir, tag string) (*Build, error) {
	b := &Build{Tag: tag, Bin: filepath.Join(dir, "bin-"+tag), Tarball: filepath.Join(dir, "images-"+tag+".tar"), Images: map[string]v1.Image{}}
	if err := os.MkdirAll(b.Bin, 0o755); err != nil {
		return nil, err
	}
	stamps := images.Stamps{Version: tag}
	platform := images.HostPlatform()
	if err := images.BuildBinaries(ctx, harness.RepoRoot(), b.Bin, platform, stamps, images.All...); err != nil {
		return nil, err
	}
	refs := map[name.Tag]v1.Image{}
	for _, i := range images.All {
		img, err := images.Assemble(i, filepath.Join(b.Bin, i.Name), platform, stamps)
		if err != nil {
			return nil, err
		}
		ref, err := name.NewTag(Registry + "/" + i.Name + ":" + tag)
		if err != nil {
			return nil, err
		}
		refs[ref], b.Images[i.Name] = img, img
	}
	if err := images.WriteTarball(b.Tarball, refs); err != nil {
		return nil, fmt.Errorf("writing %s: %w", b.Tarball, err)
	}
	return b, nil
}

// Import imports the build's images into the node.
func (b *Build) Import(ctx context.Context, c *node.Cluster) error {
	return c.ImportImages(ctx, b.Tarball)
}

// Binary is the path of one of the build's binaries.
func (b *Build) Binary(name string) string { return filepath.Join(b.Bin, name) }
