package nodebed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capo-net/capo/deploy"
	"github.com/capo-net/capo/test/testbed"
)

// PreviousTag is the previous release's image in the bed, built from its
// commit with its own `make image` builder (build/cmd/capo-image).
const PreviousTag = testbed.PreviousRelease

// ImportPreviousImage imports the previous release's image under
// PreviousTag and under each of tags.
func (b *Bed) ImportPreviousImage(logf func(string, ...any), tags ...string) error {
	archive, err := PreviousImage(logf)
	if err != nil {
		return err
	}
	if err := b.ImportImage(archive); err != nil {
		return err
	}
	for _, tag := range tags {
		if err := b.TagImage(CapoRepository+":"+PreviousTag, CapoRepository+":"+tag); err != nil {
			return err
		}
	}
	return nil
}

// PreviousImage is the previous release's image archive, built once and
// cached with the previous release's binaries (testbed.PreviousDir).
func PreviousImage(logf func(string, ...any)) (string, error) {
	src, err := testbed.PreviousSource(logf)
	if err != nil {
		return "", err
	}
	dir, err := testbed.PreviousDir()
	if err != nil {
		return "", err
	}
	archive := filepath.Join(dir, "capo-image-"+runtime.GOARCH+".tar")
	return archive, testbed.Once(archive, logf, func(tmp string) error {
		cmd := exec.Command("go", "run", "./build/cmd/capo-image", "-image", CapoRepository+":"+PreviousTag,
			"-version", testbed.PreviousRelease, "-arch", runtime.GOARCH, "-docker-arch", runtime.GOARCH, "-o", tmp)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s's image: %w\n%s", testbed.PreviousRelease, err, out)
		}
		return nil
	})
}

// TagImage gives an imported image another name, as a pull of the same
// digest under a second tag would.
func (b *Bed) TagImage(from, to string) error {
	cmd := exec.Command("ctr", "--address", ContainerdSocket, "--namespace=k8s.io", "images", "tag", "--force", from, to)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images tag %s %s: %w\n%s", from, to, err, out)
	}
	return nil
}

// RenderPrevious renders the previous release's chart, from its tree, for
// its image under tag.
func RenderPrevious(logf func(string, ...any), tag string) ([]byte, error) {
	src, err := testbed.PreviousSource(logf)
	if err != nil {
		return nil, err
	}
	c, err := loader.Load(filepath.Join(src, "deploy", "chart", "capo"))
	if err != nil {
		return nil, fmt.Errorf("loading %s's chart: %w", testbed.PreviousRelease, err)
	}
	return deploy.RenderChart(c, Release, Namespace, ChartValues(tag))
}

// RenderCurrent renders this checkout's chart for capo's image under tag,
// with what `helm upgrade` reads from this API server's discovery and the
// chart asks for: ValidatingAdmissionPolicy v1 is served.
func RenderCurrent(tag string) ([]byte, error) {
	return deploy.Render(Release, Namespace, ChartValues(tag), "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")
}

// SwitchRelease goes from one rendered release to another as `helm
// upgrade` and `helm rollback` do: every object of to applied, then every
// object of from that to lacks deleted. It does not wait.
func (b *Bed) SwitchRelease(ctx context.Context, from, to []byte) error {
	next, err := sorted(to, releaseutil.InstallOrder)
	if err != nil {
		return err
	}
	if errs := b.Apply(ctx, next, false); len(errs) > 0 {
		return errors.Join(errs...)
	}
	prev, err := sorted(from, releaseutil.UninstallOrder)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, o := range next {
		keep[objectKey(o)] = true
	}
	for _, o := range prev {
		if !keep[objectKey(o)] {
			if err := b.deleteObject(ctx, o); err != nil {
				return err
			}
		}
	}
	return nil
}

func objectKey(o *unstructured.Unstructured) string {
	return o.GroupVersionKind().GroupKind().String() + "/" + o.GetNamespace() + "/" + o.GetName()
}
