"""The weight formats a model loads in, named apart from the kernels that run them so that reading a model spec or
a command's arguments imports no torch: "bf16", the checkpoint's weights in the model's dtype, whatever it is;
"mxfp8", the projections and experts in MXFP8 (kernels/mx.py), quantised as they load."""

WEIGHT_FORMATS = ("bf16", "mxfp8")
