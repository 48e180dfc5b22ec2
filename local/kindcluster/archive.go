package kindcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kind/pkg/cluster/nodes"
)

// imageIDs are the Docker image IDs of images.
func imageIDs(ctx context.Context, images []string) (map[string]string, error) {
	ids := map[string]string{}
	for _, img := range images {
		out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "-f", "{{.Id}}", img).Output()
		if err != nil {
			return nil, fmt.Errorf("docker image inspect %s: %w", img, err)
		}
		ids[img] = strings.TrimSpace(string(out))
	}
	return ids, nil
}

// save writes images to one archive; cleanup removes it.
func save(ctx context.Context, images []string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "trellis-load-")
	if err != nil {
		return "", nil, fmt.Errorf("failed to make a directory for the image archive: %w", err)
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	archive := filepath.Join(dir, "images.tar")
	cmd := exec.CommandContext(ctx, "docker", append([]string{"save", "-o", archive}, images...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("docker save: %w: %s", err, out)
	}
	return archive, cleanup, nil
}

// stream pipes `docker save images` into consume; when consume fails
// early, docker save is killed rather than left blocked on the pipe.
func stream(ctx context.Context, images []string, consume func(io.Reader) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", append([]string{"save"}, images...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("failed to pipe docker save: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("docker save: %w", err)
	}
	cerr := consume(out)
	if cerr != nil {
		cancel()
	}
	werr := cmd.Wait()
	if werr != nil && cerr == nil {
		return fmt.Errorf("docker save: %w: %s", werr, strings.TrimSpace(stderr.String()))
	}
	return cerr
}

// importArchive imports a docker-save archive into a node's containerd
// (ctrImport), then drops the image records that only pin earlier builds:
// the digest-named ones an older import added beside the tags
// (import-<date>@sha256:…) and the CRI's image-ID records (sha256:<id>)
// whose image no tag names any more. Each load would otherwise keep the
// previous build of every image in the node for ever (GiBs after a few
// rebuilds of a reused cluster). Running containers keep their snapshots.
func importArchive(n nodes.Node, archive io.Reader) error {
	if err := ctrImport(n, archive); err != nil {
		return err
	}
	var out bytes.Buffer
	if err := n.Command("sh", "-c", pruneImages).SetStdout(&out).SetStderr(&out).Run(); err != nil {
		return fmt.Errorf("drop the digest-named image records: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

// pruneImages removes a node's import-* records, then the sha256:<id>
// and <repo>@sha256:<digest> records whose target (the DIGEST column) no
// tag has any more, then names each tagged image by its manifest digest
// too (<repo>@<digest>), as a registry pull would: a workload pinned by
// digest (the gateway's provenance check asks for that) then starts from
// the loaded image instead of trying to pull it.
const pruneImages = `set -e
ctr='ctr --namespace=k8s.io'
$ctr images ls -q | grep '^import-' | xargs -r $ctr images rm >/dev/null
$ctr images ls | awk 'NR > 1 && $1 !~ /^sha256:/ { keep[$3] = 1 }
  NR > 1 && $1 ~ /^sha256:/ { id[$1] = $3 }
  END { for (r in id) if (!(id[r] in keep)) print r }' | xargs -r $ctr images rm >/dev/null
$ctr images ls | awk 'NR > 1 && $1 ~ /@sha256:/ { d[$1] = $3 }
  NR > 1 && $1 !~ /^sha256:/ && $1 !~ /@sha256:/ { t[$3] = 1 }
  END { for (r in d) if (!(d[r] in t)) print r }' | xargs -r $ctr images rm >/dev/null
$ctr images ls | awk 'NR > 1 { have[$1] = 1 }
  NR > 1 && $1 !~ /^sha256:/ && $1 !~ /@sha256:/ { n = $1; sub(/:[^:\/]*$/, "", n); want[$1] = n "@" $3 }
  END { for (s in want) if (!(want[s] in have)) print s, want[s] }' |
  while read -r src dst; do $ctr images tag "$src" "$dst" >/dev/null; done`

// loadInto imports the archive into one node and records the image IDs
// it now holds.
func loadInto(n nodes.Node, archive string, imgs []string, ids, had map[string]string) error {
	f, err := os.Open(archive)
	if err != nil {
		return fmt.Errorf("failed to open image archive %s for node %s: %w", archive, n.String(), err)
	}
	defer f.Close()
	if err := importArchive(n, f); err != nil {
		return fmt.Errorf("load images into %s: %w", n.String(), err)
	}
	return record(n, imgs, ids, had)
}

// record writes to the node's loadedFile the image IDs it held (had) plus
// imgs at ids.
func record(n nodes.Node, imgs []string, ids, had map[string]string) error {
	rec := maps.Clone(had)
	for _, img := range imgs {
		rec[img] = ids[img]
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("failed to encode the loaded images of node %s: %w", n.String(), err)
	}

	if err := n.Command("sh", "-c", "cat > "+loadedFile).SetStdin(bytes.NewReader(data)).Run(); err != nil {
		return fmt.Errorf("record loaded images in %s: %w", n.String(), err)
	}
	return nil
}
