package recorded

import apierrors "k8s.io/apimachinery/pkg/api/errors"

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
