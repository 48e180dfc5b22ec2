package forecast

import (
	"math"
	"time"
)

// Change-point thresholds: a split must explain the daily peaks far
// better than one line (an F statistic), and the two lines must disagree
// at the split by a real step (relative to the level and to the noise),
// so that compounding growth, whose pieces join, is not cut.
const (
	minSegmentDays = 7
	// minOldDays is the shortest old level a level shift cuts off: a few
	// days at the start of the window are enough to see that they are
	// history no longer worth fitting.
	minOldDays    = 3
	minF          = 40
	minJumpLevel  = 0.10
	minJumpSigmas = 4
)

// levelShift returns the day at which the daily peaks shift level for
// good (the start of the history worth fitting), or 0 when they do not.
// start is the first day's weekday: the weekly cycle is divided out first,
// or weekends would hide a step as noise. Three weeks are needed to tell
// a weekday's factor from a shift.
func levelShift(peaks []float64, start time.Weekday) int {
	if len(peaks) < 21 {
		return 0
	}
	n := 0
	for _, v := range peaks {
		if !math.IsNaN(v) {
			n++
		}
	}
	if n < 2*minSegmentDays {
		return 0
	}
	// Each candidate split divides out the weekly cycle as if the level
	// shifted there (a week's median does not straddle it), so that a step
	// next to a weekend does not blur the weekday factors it is judged by.
	best, bestF := -1, 0.0
	var bestXs, bestYs []float64
	for k := minOldDays; k <= len(peaks)-minSegmentDays; k++ {
		xs, ys, split := points(deseasonWeekly(peaks, start, k), k)
		if split < minOldDays || len(xs)-split < minSegmentDays {
			continue
		}
		sse := linearSSE(xs[:split], ys[:split]) + linearSSE(xs[split:], ys[split:])
		f := ((linearSSE(xs, ys) - sse) / 2) / math.Max(sse/float64(len(xs)-4), 1e-12)
		if best < 0 || f > bestF {
			best, bestF, bestXs, bestYs = split, f, xs, ys
		}
	}
	if best < 0 || bestF < minF {
		return 0
	}
	xs, ys := bestXs, bestYs
	bestSSE := linearSSE(xs[:best], ys[:best]) + linearSSE(xs[best:], ys[best:])
	la, lb := lineFit(xs[:best], ys[:best])
	ra, rb := lineFit(xs[best:], ys[best:])
	at := (xs[best-1] + xs[best]) / 2
	jump := math.Abs((ra + rb*at) - (la + lb*at))
	sigma := math.Sqrt(bestSSE / float64(len(xs)-4))
	level := math.Max(math.Abs(ra+rb*at), math.Abs(la+lb*at))
	if jump < minJumpLevel*level || jump < minJumpSigmas*sigma {
		return 0
	}
	return int(xs[best])
}

// points are the observed days of peaks (day index, value) and how many
// of them come before day k.
func points(peaks []float64, k int) (xs, ys []float64, before int) {
	for i, v := range peaks {
		if math.IsNaN(v) {
			continue
		}
		if i < k {
			before++
		}
		xs = append(xs, float64(i))
		ys = append(ys, v)
	}
	return xs, ys, before
}

// lineFit is the least-squares line y = a + b·x.
func lineFit(xs, ys []float64) (a, b float64) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	if den := n*sxx - sx*sx; den != 0 {
		b = (n*sxy - sx*sy) / den
	}
	return (sy - b*sx) / n, b
}

// deseasonWeekly divides each daily peak by its weekday's factor: the
// median, over that weekday's days, of the peak's ratio to the median of
// the week around it. The week around a day stops at day split (0: no
// split), where the level may shift, so the factors hold on both sides of
// one.
func deseasonWeekly(peaks []float64, start time.Weekday, split int) []float64 {
	if len(peaks) < 14 {
		return peaks
	}
	var byDay [7][]float64
	for i, v := range peaks {
		lo, hi := max(0, i-3), min(len(peaks), i+4)
		if split > 0 && i < split {
			hi = min(hi, split)
		} else if split > 0 {
			lo = max(lo, split)
		}
		local := median(peaks[lo:hi])
		if local > 0 && !math.IsNaN(v) {
			wd := (int(start) + i) % 7
			byDay[wd] = append(byDay[wd], v/local)
		}
	}
	out := make([]float64, len(peaks))
	for i, v := range peaks {
		f := median(byDay[(int(start)+i)%7])
		if math.IsNaN(f) || f <= 0 {
			f = 1
		}
		out[i] = v / f
	}
	return out
}

// slopeChange returns the index of the daily mean after which the trend's
// slope changed for good (a ramp that levelled off, growth that sped up),
// or 0. It fits a hinge (a line that bends once) to the weekly moving
// average and keeps the bend when it explains the series far better than
// one line and changes the level by 10% over the segment after it.
func slopeChange(dm []float64) int {
	const w = 7
	if len(dm) < 3*w {
		return 0
	}
	var xs, ys []float64
	for k := w - 1; k < len(dm); k++ {
		if v := meanOf(dm[k-w+1 : k+1]); !math.IsNaN(v) {
			xs = append(xs, float64(k)-float64(w-1)/2)
			ys = append(ys, v)
		}
	}
	n := len(xs)
	sse0 := linearSSE(xs, ys)
	best, bestSSE, bestBend := -1, math.Inf(1), 0.0
	for i := minSegmentDays; i <= n-minSegmentDays; i++ {
		sse, bend := hingeSSE(xs, ys, xs[i])
		if sse < bestSSE {
			best, bestSSE, bestBend = i, sse, bend
		}
	}
	if best < 0 {
		return 0
	}
	f := (sse0 - bestSSE) / math.Max(bestSSE/float64(n-3), 1e-12)
	level := math.Abs(meanOf(ys))
	if f < minF || math.Abs(bestBend)*(xs[n-1]-xs[best]) < minJumpLevel*level {
		return 0
	}
	return int(math.Ceil(xs[best]))
}

// hingeSSE fits y = a + b·x + c·max(0, x-k) by least squares and returns
// its squared residuals and c, the change of slope.
func hingeSSE(xs, ys []float64, k float64) (sse, c float64) {
	// Normal equations for three columns: 1, x, h = max(0, x-k).
	var a [3][4]float64
	for i := range xs {
		row := [3]float64{1, xs[i], math.Max(0, xs[i]-k)}
		for r := range 3 {
			for q := range 3 {
				a[r][q] += row[r] * row[q]
			}
			a[r][3] += row[r] * ys[i]
		}
	}
	coef, ok := solve3(a)
	if !ok {
		return math.Inf(1), 0
	}
	for i := range xs {
		e := ys[i] - coef[0] - coef[1]*xs[i] - coef[2]*math.Max(0, xs[i]-k)
		sse += e * e
	}
	return sse, coef[2]
}

// solve3 solves a 3×3 system (augmented matrix) by Gauss-Jordan
// elimination with partial pivoting.
func solve3(a [3][4]float64) ([3]float64, bool) {
	for col := range 3 {
		p := col
		for r := col + 1; r < 3; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[p][col]) {
				p = r
			}
		}
		if math.Abs(a[p][col]) < 1e-12 {
			return [3]float64{}, false
		}
		a[col], a[p] = a[p], a[col]
		for r := range 3 {
			if r == col {
				continue
			}
			f := a[r][col] / a[col][col]
			for q := col; q < 4; q++ {
				a[r][q] -= f * a[col][q]
			}
		}
	}
	return [3]float64{a[0][3] / a[0][0], a[1][3] / a[1][1], a[2][3] / a[2][2]}, true
}
