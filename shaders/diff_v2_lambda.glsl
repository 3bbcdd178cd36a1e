// DIFF V2's λ of one output head from its logit z (docs/maths.md "DIFF V2"): sigmoid(z) in fp32,
// exact at both ends: exp(−z) overflows to +inf for z < −88.7, and 1/(1 + inf) = 0.
float v2_lambda(float z) { return 1.0 / (1.0 + exp(-z)); }
