package controller_test

import (
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
)

// controllerConfig lets every test start its own manager with the same controller name.
func controllerConfig() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}
