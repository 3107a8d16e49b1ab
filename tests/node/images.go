package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"code.tuna.am/tuna/k8s-operator/hack/images"
)

// PauseImage is the sandbox image containerd runs for every pod: the
// harness's own (tests/node/pause), imported at start, never pulled.
const PauseImage = "tuna.test/pause:1"

var pause = images.Image{Name: "pause", Package: "./tests/node/pause"}

// importPause builds the pause image and imports it.
func (c *Cluster) importPause(ctx context.Context) error {
	built, err := images.Build(ctx, repoRoot(), images.HostPlatform(), images.Stamps{}, pause)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(PauseImage)
	if err != nil {
		return err
	}
	return c.Import(ctx, map[name.Tag]v1.Image{ref: built[pause.Name]})
}

// Import writes images to a tarball and imports it into the node.
func (c *Cluster) Import(ctx context.Context, imgs map[name.Tag]v1.Image) error {
	file := filepath.Join(c.Dir, "import.tar")
	defer func() { _ = os.Remove(file) }()
	if err := images.WriteTarball(file, imgs); err != nil {
		return fmt.Errorf("writing images: %w", err)
	}
	return c.ImportImages(ctx, file)
}
