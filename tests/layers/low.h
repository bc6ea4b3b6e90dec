/* Fixture of the layers self-test: a file of the lower layer. */
#ifndef RT_LAYERS_LOW_H
#define RT_LAYERS_LOW_H
int rt_layers_low(int n);
#endif
