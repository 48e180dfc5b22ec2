package forecast

import (
	"math"
	"slices"
)

// median of xs (NaNs skipped); NaN when none are left.
func median(xs []float64) float64 { return quantile(xs, 0.5) }

// quantile of xs at q in [0,1] by linear interpolation between order
// statistics (NaNs skipped); NaN when none are left.
func quantile(xs []float64, q float64) float64 {
	s := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// mad is the median absolute deviation from the median, scaled to the
// standard deviation of a normal distribution (×1.4826): a scale that a
// few spikes do not move.
func mad(xs []float64) float64 {
	m := median(xs)
	d := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			d = append(d, math.Abs(x-m))
		}
	}
	return 1.4826 * median(d)
}

// theilSen fits y = a + b·x robustly: b is the median of the pairwise
// slopes, a the median of y - b·x. Points with a NaN y are skipped.
func theilSen(xs, ys []float64) (a, b float64) {
	var slopes []float64
	for i := range xs {
		if math.IsNaN(ys[i]) {
			continue
		}
		for j := i + 1; j < len(xs); j++ {
			if math.IsNaN(ys[j]) || xs[j] == xs[i] {
				continue
			}
			slopes = append(slopes, (ys[j]-ys[i])/(xs[j]-xs[i]))
		}
	}
	if len(slopes) > 0 {
		b = median(slopes)
	}
	rs := make([]float64, 0, len(xs))
	for i := range xs {
		if !math.IsNaN(ys[i]) {
			rs = append(rs, ys[i]-b*xs[i])
		}
	}
	return median(rs), b
}

// linearSSE is the sum of squared residuals about the least-squares line.
func linearSSE(xs, ys []float64) float64 {
	a, b := lineFit(xs, ys)
	var sse float64
	for i := range xs {
		r := ys[i] - a - b*xs[i]
		sse += r * r
	}
	return sse
}

// slopeStdErr is the least-squares standard error of a slope fitted to
// points whose residual standard deviation is sigma.
func slopeStdErr(xs []float64, sigma float64) float64 {
	if len(xs) < 3 {
		return 0
	}
	var m float64
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	var sxx float64
	for _, x := range xs {
		sxx += (x - m) * (x - m)
	}
	if sxx == 0 {
		return 0
	}
	return sigma / math.Sqrt(sxx)
}

// normalQuantile is the standard normal distribution's quantile at p
// (Acklam's rational approximation, relative error below 1.2e-9).
func normalQuantile(p float64) float64 {
	a := [...]float64{-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00}
	b := [...]float64{-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01, -1.328068155288572e+01}
	c := [...]float64{-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00}
	d := [...]float64{7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00}
	const lowP = 0.02425
	switch {
	case p <= 0:
		return math.Inf(-1)
	case p >= 1:
		return math.Inf(1)
	case p < lowP:
		q := math.Sqrt(-2 * math.Log(p))
		return (((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q + c[5]) / ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q + 1)
	case p > 1-lowP:
		q := math.Sqrt(-2 * math.Log(1-p))
		return -(((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q + c[5]) / ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q + 1)
	default:
		q := p - 0.5
		r := q * q
		return (((((a[0]*r+a[1])*r+a[2])*r+a[3])*r+a[4])*r + a[5]) * q / (((((b[0]*r+b[1])*r+b[2])*r+b[3])*r+b[4])*r + 1)
	}
}
