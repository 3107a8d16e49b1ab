//go:build conformance

package conformance

import (
	"context"
	"fmt"
	"io/fs"
	"regexp"
	"sort"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	gwconformance "sigs.k8s.io/gateway-api/conformance"

	"code.tuna.am/tuna/k8s-operator/hack/images"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// echoBasic is the suite's backend, built from the conformance module at
// the version go.mod pins, FROM scratch as the product's images are.
var echoBasic = images.Image{Name: "echo-basic", Package: "sigs.k8s.io/gateway-api/conformance/echo-basic"}

// dnsStandIn replaces the base manifests' coredns (tests/node/conformance/dnsstandin).
var dnsStandIn = images.Image{Name: "dnsstandin", Package: "./tests/node/conformance/dnsstandin"}

var imageRef = regexp.MustCompile(`(?m)^\s*image:\s*"?([^"\s]+)"?\s*$`)

// suiteImages are the images the Gateway tests' manifests name (base/ and
// tests/; mesh/ is for mesh implementations), by the name of the image
// built here that answers for them: every echo-basic tag, and coredns.
func suiteImages() (map[string][]string, error) {
	refs := map[string]bool{}
	walk := func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(gwconformance.Manifests, path)
		if err != nil {
			return err
		}
		for _, m := range imageRef.FindAllSubmatch(b, -1) {
			refs[string(m[1])] = true
		}
		return nil
	}
	for _, dir := range []string{"base", "tests"} {
		if err := fs.WalkDir(gwconformance.Manifests, dir, walk); err != nil {
			return nil, err
		}
	}
	out := map[string][]string{}
	for ref := range refs {
		repo, _, _ := cutTag(ref)
		switch repo {
		case "registry.k8s.io/gateway-api/echo-basic":
			out[echoBasic.Name] = append(out[echoBasic.Name], ref)
		case "registry.k8s.io/coredns/coredns":
			out[dnsStandIn.Name] = append(out[dnsStandIn.Name], ref)
		default:
			return nil, fmt.Errorf("the suite's manifests name image %s, which this harness does not build", ref)
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out, nil
}

func cutTag(ref string) (repo, tag string, ok bool) {
	for i := len(ref) - 1; i >= 0 && ref[i] != '/'; i-- {
		if ref[i] == ':' {
			return ref[:i], ref[i+1:], true
		}
	}
	return ref, "", false
}

// importSuiteImages builds echo-basic and the DNS stand-in and imports
// them into the node under every name the suite's manifests use, so that
// its pods (imagePullPolicy IfNotPresent) never pull.
func importSuiteImages(ctx context.Context) error {
	want, err := suiteImages()
	if err != nil {
		return err
	}
	built, err := images.Build(ctx, harness.RepoRoot(), images.HostPlatform(), images.Stamps{}, echoBasic, dnsStandIn)
	if err != nil {
		return err
	}
	// The stand-in binds port 53 as coredns does: as root, with only
	// NET_BIND_SERVICE (the manifest drops every other capability).
	cf, err := built[dnsStandIn.Name].ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Config.User = "0:0"
	if built[dnsStandIn.Name], err = mutate.ConfigFile(built[dnsStandIn.Name], cf); err != nil {
		return err
	}
	refs := map[name.Tag]v1.Image{}
	for img, names := range want {
		for _, n := range names {
			tag, err := name.NewTag(n)
			if err != nil {
				return err
			}
			refs[tag] = built[img]
		}
	}
	return env.cluster.Import(ctx, refs)
}
