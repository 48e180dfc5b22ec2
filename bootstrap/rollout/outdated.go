package rollout

import (
	"context"
	"fmt"
)

// outdated returns the instances a rollout replaces: with replaceAll every
// one; else those not launched from the group's launch-template version
// next, except, in an image rollout (image set), those already running the
// image. A rollback after an aborted canary so replaces the canary only,
// not the nodes that never left the previous image, although they were
// launched from an older version (its image data is the same). A relaunch
// (image empty: a cluster upgrade's apply) replaces by version alone, since
// more than the image may have changed.
func outdated(ctx context.Context, cloud Cloud, insts []Instance, image, next string, replaceAll bool) ([]string, error) {
	var ids, older []string
	for _, in := range insts {
		switch {
		case replaceAll:
			ids = append(ids, in.ID)
		case next == "" || in.Version != next:
			older = append(older, in.ID)
		}
	}
	if image == "" || len(older) == 0 {
		return append(ids, older...), nil
	}
	running, err := cloud.InstanceImages(ctx, older)
	if err != nil {
		return nil, fmt.Errorf("images of the instances: %w", err)
	}
	for _, id := range older {
		if running[id] != image {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
