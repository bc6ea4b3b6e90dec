/* Fixture of the layers self-test: a file of the upper layer. */
#ifndef RT_LAYERS_HIGH_H
#define RT_LAYERS_HIGH_H
int rt_layers_high(int n);
#endif
